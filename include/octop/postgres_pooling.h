// PostgresPooling: how octop reaches PostgreSQL when a connection pooler such as PgBouncer sits between them
// (docs/configuration.md, "Behind PgBouncer").
//
// In session mode a pooler changes nothing and these stay at their defaults. In transaction mode each
// transaction may run on another server session, so what a session keeps between transactions is lost:
//   - named prepared statements (PgBouncer before 1.21 does not carry them across): prepared_statements =
//     false sends every statement unnamed, parsed and planned each time;
//   - LISTEN (a notification reaches the server session that listened, not the client): listen_url names a
//     direct, session-long connection for the listener alone. Without it nothing is lost -- every wake-up
//     has a polling fallback -- but work is found at the next poll instead of at once.
//
// SQLite ignores it. Thread-safety: a plain value.
#ifndef OCTOP_POSTGRES_POOLING_H_
#define OCTOP_POSTGRES_POOLING_H_

#include <string>

namespace octop {

struct PostgresPooling {
  // false: no named prepared statements (a pooler in transaction mode).
  bool prepared_statements = true;
  // The URL the LISTEN connection uses; empty: the database URL.
  std::string listen_url;

  bool operator==(const PostgresPooling&) const = default;
};

}  // namespace octop

#endif  // OCTOP_POSTGRES_POOLING_H_
