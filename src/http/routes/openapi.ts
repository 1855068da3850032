import { Router } from 'express';
import { methodNotAllowed } from '../middleware/require-json';
import { buildOpenApiDocument } from '../openapi';

export function openApiRoutes(): Router {
  const router = Router();
  const document = buildOpenApiDocument();
  router
    .route('/openapi.json')
    .get((_req, res) => {
      res.json(document);
    })
    .all(methodNotAllowed('GET'));
  return router;
}
