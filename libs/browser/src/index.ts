export * from './browser.constants';
export * from './browser.errors';
export * from './browser.module';
export * from './browser.options';
export * from './browser.types';
export { BrowserRouter } from './browser-router';
export { capData } from './browser-output';
export * from './driver/browser-driver.port';
export { WorkspaceFiles } from './workspace-files';
