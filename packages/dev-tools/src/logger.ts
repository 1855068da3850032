/**
 * What these tools log through: the service's pino logger fits it, and so does anything else with these
 * two methods (this package imports nothing of the service).
 */
export interface Logger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}
