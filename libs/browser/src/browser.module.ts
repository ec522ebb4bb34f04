import { Global, Module } from '@nestjs/common';
import { BrowserRouter } from './browser-router';

@Global()
@Module({ providers: [BrowserRouter], exports: [BrowserRouter] })
export class BrowserModule {}
