-- Up Migration

SET LOCAL lock_timeout = '2s';

-- Teller's link tokens: the nonce a website's page opens Teller Connect with. Connect signs its success
-- payload over that nonce (https://teller.io/docs/guides/connect, "Verifying Enrollment Object Signature"),
-- and the payload does not carry the nonce back, so the service keeps each nonce it issued with the user it
-- was issued to, until when it may be used, the enrollment it was issued to repair (update mode), and the
-- enrollment that used it: a nonce binds to the first enrollment exchanged with it, for good. The nonce itself
-- grants nothing without a payload Teller signed over it, so it is kept as it is (verifying needs it).
-- A new table: nothing running reads it before this migration, and creating it locks nothing else.
CREATE TABLE link_nonces (
  nonce text PRIMARY KEY CHECK (length(nonce) BETWEEN 16 AND 128),
  subscription_user_id text NOT NULL,
  app_name text NOT NULL,
  expires_at timestamptz NOT NULL,
  repair_enrollment_id text,
  enrollment_id text,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT link_nonces_used_consistently CHECK ((enrollment_id IS NULL) = (used_at IS NULL))
);

-- An exchange tries the user's newest nonces; housekeeping prunes by expiry.
CREATE INDEX link_nonces_user_idx ON link_nonces (subscription_user_id, created_at DESC);
CREATE INDEX link_nonces_expires_at_idx ON link_nonces (expires_at);

-- Down Migration
DROP TABLE link_nonces;
