-- No-GPU mode (issue 46): an instance started with count 0 runs on no GPU
-- at the policy's no_gpu_price_per_hour_fen. The check on count allowed
-- 1 and up; SQLite cannot alter a CHECK, and removing or loosening one
-- changes nothing stored, so the table's definition is edited in place
-- (SQLite's documented procedure for such changes, "Making Other Kinds Of
-- Table Schema Changes"): RESET reloads the schema on this connection,
-- and the table made and dropped after it moves the schema cookie, which
-- makes every other connection reload it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(sql, 'count             INTEGER NOT NULL CHECK (count > 0)', 'count             INTEGER NOT NULL CHECK (count >= 0)')
WHERE type = 'table' AND name = 'instances';
PRAGMA writable_schema = RESET;
-- The edit must have found its text: otherwise this insert fails its
-- check, and the migration with it (loudly, nothing changed).
CREATE TABLE migration_0040_check (edited INTEGER NOT NULL CHECK (edited = 1));
INSERT INTO migration_0040_check SELECT sql LIKE '%CHECK (count >= 0)%' FROM sqlite_master WHERE type = 'table' AND name = 'instances';
DROP TABLE migration_0040_check;
