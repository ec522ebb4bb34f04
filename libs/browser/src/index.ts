export * from './browser-router';
export * from './browser.module';
