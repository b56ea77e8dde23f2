-- Test support (namespace_admin.h): what tests inspect and do to an SQLite namespace that octop itself never does.
-- Embedded into octop_store_admin only.

-- name: DescribeTable
SELECT name, type, "notnull", pk FROM pragma_table_info(:table) ORDER BY cid;

-- name: ListIndexes
SELECT name, "unique", partial FROM pragma_index_list(:table) ORDER BY name;

-- name: IndexColumns
SELECT name FROM pragma_index_info(:index) ORDER BY seqno;

-- name: ListTables
SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name;

-- name: ListConfig
SELECT key, value, updated_at FROM octop_config ORDER BY key;

-- name: DeleteTask
DELETE FROM backstage_backend_tasks__tasks WHERE id = :id;
