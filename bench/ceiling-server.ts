import express from 'express';

/** The ceiling of this machine for an Express handler: a GET that answers a constant. */
const BODY = { status: 'ok' };

const app = express();
app.get('/', (_req, res) => {
  res.json(BODY);
});

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', stop);
