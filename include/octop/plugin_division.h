// PluginDivision: where each plugin's task table lives on a PostgreSQL server, decided as Backstage's
// `backend.database` settings decide it, so that octop nodes and Backstage backends pointed at the same
// server share one `backstage_backend_tasks__tasks` per plugin with no other setting (docs/store.md, "Sharing
// a database with Backstage").
//
//   kDatabase (Backstage's default): a database per plugin, named prefix + plugin id (created when missing),
//             tables in its `public` schema. The URL's own database holds only octop's job queue.
//   kSchema:  one database (the URL's), a schema per plugin named schema_prefix + plugin id.
//
// SQLite ignores it: a plugin's tables are always <directory>/<plugin id>.sqlite, as Backstage's
// `connection.directory`.
//
// Thread-safety: a plain value.
#ifndef OCTOP_PLUGIN_DIVISION_H_
#define OCTOP_PLUGIN_DIVISION_H_

#include <string>

namespace octop {

struct PluginDivision {
  enum class Mode { kDatabase, kSchema };
  Mode mode = Mode::kDatabase;
  // backend.database.prefix: the plugin's database is prefix + plugin id (kDatabase).
  std::string prefix = "backstage_plugin_";
  // backend.database.schemaPrefix: the plugin's schema is schema_prefix + plugin id (kSchema).
  std::string schema_prefix;

  bool operator==(const PluginDivision&) const = default;
};

}  // namespace octop

#endif  // OCTOP_PLUGIN_DIVISION_H_
