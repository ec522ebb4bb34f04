import type { INestApplication } from '@nestjs/common';
import type { OpenAPIObject } from '@nestjs/swagger';
import type { NextFunction, Request, Response } from 'express';
import { errorBody } from '../../platform/validation/error-body';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** A documented path as a matcher (`{sessionId}` is one segment), with the methods it has. */
interface Route {
  pattern: RegExp;
  allow: string[];
}

function routesOf(document: OpenAPIObject): Route[] {
  return Object.entries(document.paths).map(([template, item]) => {
    const methods = METHODS.filter((m) => m in item).map((m) => m.toUpperCase());
    // Express answers HEAD for every GET route.
    if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
    const source = template
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
      .join('[^/]+');
    return { pattern: new RegExp(`^${source}/?$`), allow: methods };
  });
}

/**
 * A method a documented path does not have is a 405 naming those it has (`Allow`), in the error envelope; Express
 * alone would answer 404, as if the path did not exist. Paths the document does not have are left to the routes.
 */
export function installMethodNotAllowed(app: INestApplication, document: OpenAPIObject): void {
  const routes = routesOf(document);
  app.use((req: Request, res: Response, next: NextFunction) => {
    const route = routes.find((r) => r.pattern.test(req.path));
    if (!route || route.allow.includes(req.method)) return next();
    const allow = route.allow.join(', ');
    res.setHeader('Allow', allow);
    res
      .status(405)
      .json(
        errorBody('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${req.path}; it takes ${allow}`),
      );
  });
}
