import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { GraphController } from './graph.controller';

/** Graph queries over the REST API: the session graph, failure context, file lineage. */
@Module({ imports: [SessionsModule], controllers: [GraphController] })
export class GraphApiModule {}
