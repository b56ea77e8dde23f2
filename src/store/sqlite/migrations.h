// The SQLite backend's two migration lines (migrations.sql): a task namespace's, Backstage's knex migrations
// recorded in knex's table; a job namespace's, octop's, recorded in octop_migrations. Each is applied in one
// BEGIN IMMEDIATE, so concurrent migrators (stores, processes, a Backstage backend's knex) take turns and
// none records a step twice (docs/store.md, "Migrations").
//
// Thread-safety: each call uses the connection it is given, held by the caller alone.
#ifndef OCTOP_STORE_SQLITE_MIGRATIONS_H_
#define OCTOP_STORE_SQLITE_MIGRATIONS_H_

#include <string>
#include <vector>

#include "store/sqlite/connection.h"
#include "store/store.h"

namespace octop::store::sqlite {

// Applies the line's missing migrations up to `version` (1..LatestSchemaVersion(line)), `now` the time to
// record.
Status ApplyMigrations(Connection& conn, MigrationLine line, int version, const std::string& now);

// The names of the line's applied migrations, in the line's order.
Result<std::vector<std::string>> AppliedMigrations(Connection& conn, MigrationLine line);

}  // namespace octop::store::sqlite

#endif  // OCTOP_STORE_SQLITE_MIGRATIONS_H_
