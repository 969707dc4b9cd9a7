-- leasehold lease table (MySQL / MariaDB). Idempotent: safe to run more than once.
-- One row per lease name; rows are never deleted (a release clears holder,
-- an administrative delete sets deleted), so tokens never repeat; a version is a random write id.
-- acquired_at_ms / expires_at_ms are Unix ms on the server's clock (UTC_TIMESTAMP(6)); InnoDB is required.
-- The user needs SELECT, INSERT and UPDATE on the table.
CREATE TABLE IF NOT EXISTS `leasehold_leases` (
    name               VARCHAR(200) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    holder             VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    fence_token        BIGINT NOT NULL,
    version            BIGINT NOT NULL,
    ttl_ms             BIGINT NOT NULL,
    acquired_at_ms     BIGINT NOT NULL,
    expires_at_ms      BIGINT NOT NULL,
    wall_expires_at_ms BIGINT NULL,
    deleted            BOOLEAN NOT NULL DEFAULT FALSE
) ENGINE=InnoDB;
