-- Test support (namespace_admin.h): what tests inspect and do to a PostgreSQL namespace that octop itself never does.
-- Embedded into octop_store_admin only. {ns} is the schema, a quoted identifier.

-- name: DescribeTable
-- $1 schema, $2 table (unquoted names).
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey))
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- name: DescribeIndexes
-- $1 schema, $2 table. Key columns in index order; expression parts (attnum 0) are left out.
SELECT ic.relname, i.indisunique, i.indpred IS NOT NULL,
       array_to_json(ARRAY(SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
             ORDER BY k.ord))::text AS columns
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2
ORDER BY ic.relname COLLATE "C";

-- name: ListTables
-- $1 schema (unquoted).
SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname COLLATE "C";

-- name: ListConfig
SELECT key, value::text, updated_at FROM {ns}.octop_config ORDER BY key COLLATE "C";

-- name: DeleteTask
DELETE FROM {ns}.backstage_backend_tasks__tasks WHERE id = $1;
