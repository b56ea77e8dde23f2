-- Per-connection settings of the SQLite backend, run once when a connection opens.

-- name: EnableWal
-- WAL: readers never block the writer and the writer never blocks readers; one writer at a time.
PRAGMA journal_mode = WAL;

-- name: ConfigureConnection
-- NORMAL is durable across application crashes in WAL mode (a power loss may drop the last commits).
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
