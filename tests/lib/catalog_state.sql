-- What CREATE EXTENSION pg_dlock / ALTER EXTENSION pg_dlock UPDATE left in
-- the catalogs of this database, one line per fact, in a fixed order, with
-- no OID of the database's own objects: two databases whose extension
-- objects are the same print the same text (tests/suites/15-upgrade.sh).
-- Each object appears by name with its definition as PostgreSQL prints it
-- (pg_get_viewdef, pg_get_functiondef, pg_get_constraintdef, ...), and each
-- stored expression tree too (view rules, constraints, defaults, index
-- expressions, function defaults), with the parse locations and the OIDs of
-- non-builtin objects (16384 and above) masked: so a change that prints the
-- same but parses into another tree (a simple CASE made searched, say) is
-- seen as well.
\pset format unaligned
\pset tuples_only on
\pset footer off
SET search_path = pg_catalog, pg_temp;

-- a stored tree without what differs between two databases with the same
-- objects: parse locations (in the text of the statement that made it), and
-- OIDs of objects made after initdb, as numbers or as constants of the reg*
-- types (nextval('dlock.audit_log_id_seq'::regclass))
CREATE FUNCTION pg_temp.tree(t text) RETURNS text LANGUAGE sql IMMUTABLE AS
$$SELECT regexp_replace(regexp_replace(regexp_replace(t,
		 ':(location|stmt_location|stmt_len) -?[0-9]+', '', 'g'),
		 '(:consttype (2202|2203|2204|2205|2206|3734|3769|4089|4096|4191) [^{}]*?:constvalue [0-9]+ )\[[-0-9 ]*\]', '\1OID', 'g'),
		 '\m[0-9]{5,}\M', 'OID', 'g')$$;

-- the extension
SELECT 'extension ' || e.extname || ' ' || e.extversion || ' schema ' || n.nspname
	   || ' relocatable ' || e.extrelocatable
	   || ' config ' || coalesce((SELECT string_agg(c::regclass::text, ',' ORDER BY c::regclass::text)
									FROM unnest(e.extconfig) c), '')
	   || ' conditions ' || coalesce(array_to_string(e.extcondition, '|'), '')
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pg_dlock';
SELECT 'schema ' || n.nspname || ' owner ' || pg_get_userbyid(n.nspowner) || ' acl ' || coalesce(n.nspacl::text, '')
  FROM pg_namespace n WHERE n.nspname = 'dlock';

-- every member, and what else lives in the schema
SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'pg_dlock' AND d.deptype = 'e'
 ORDER BY 1;

-- relations: kind, options, owner, privileges, comment; columns; the view's text and tree
SELECT 'relation ' || c.oid::regclass || ' kind ' || c.relkind::text || ' persistence ' || c.relpersistence::text
	   || ' options ' || coalesce(array_to_string(c.reloptions, ','), '')
	   || ' owner ' || pg_get_userbyid(c.relowner) || ' acl ' || coalesce(c.relacl::text, '')
	   || ' rowsecurity ' || c.relrowsecurity || ' replident ' || c.relreplident::text
	   || ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '')
  FROM pg_class c WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY c.relname;
SELECT 'column ' || c.oid::regclass || '.' || a.attname || ' #' || a.attnum || ' ' || format_type(a.atttypid, a.atttypmod)
	   || ' notnull ' || a.attnotnull || ' dropped ' || a.attisdropped || ' identity ' || a.attidentity::text
	   || ' generated ' || a.attgenerated::text || ' stattarget ' || a.attstattarget
	   || ' collation ' || coalesce(a.attcollation::regcollation::text, '')
	   || ' default ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '')
	   || ' default-tree ' || coalesce(pg_temp.tree(ad.adbin::text), '')
	   || ' acl ' || coalesce(a.attacl::text, '')
	   || ' comment ' || coalesce(col_description(c.oid, a.attnum), '')
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
	   LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
 WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY c.relname, a.attnum;
SELECT 'view ' || c.oid::regclass || E'\n' || pg_get_viewdef(c.oid)
  FROM pg_class c WHERE c.relnamespace = 'dlock'::regnamespace AND c.relkind IN ('v', 'm') ORDER BY c.relname;
SELECT 'rule ' || r.ev_class::regclass || ' ' || r.rulename || ' ' || r.ev_type::text || ' ' || r.is_instead
	   || E'\n' || pg_temp.tree(r.ev_action::text) || E'\nqual ' || coalesce(pg_temp.tree(r.ev_qual::text), '')
  FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
 WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY c.relname, r.rulename;
SELECT 'constraint ' || coalesce(c.conrelid::regclass::text, '') || coalesce(c.contypid::regtype::text, '')
	   || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
	   || ' deferrable ' || c.condeferrable || ' validated ' || c.convalidated
	   || ' tree ' || coalesce(pg_temp.tree(c.conbin::text), '')
  FROM pg_constraint c WHERE c.connamespace = 'dlock'::regnamespace ORDER BY 1;
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
	   || ' exprs ' || coalesce(pg_temp.tree(i.indexprs::text), '') || ' pred ' || coalesce(pg_temp.tree(i.indpred::text), '')
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY 1;
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'dlock'::regnamespace AND NOT t.tgisinternal ORDER BY 1;
SELECT 'policy ' || p.polrelid::regclass || ' ' || p.polname
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY 1;
SELECT 'sequence ' || s.seqrelid::regclass || ' ' || format_type(s.seqtypid, NULL) || ' ' || s.seqstart
	   || ' ' || s.seqincrement || ' ' || s.seqmax || ' ' || s.seqmin || ' ' || s.seqcache || ' ' || s.seqcycle
  FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = 'dlock'::regnamespace ORDER BY 1;

-- functions: definition, privileges, comment, argument defaults' tree
SELECT 'function ' || p.oid::regprocedure || ' owner ' || pg_get_userbyid(p.proowner)
	   || ' acl ' || coalesce(p.proacl::text, '')
	   || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
	   || ' defaults-tree ' || coalesce(pg_temp.tree(p.proargdefaults::text), '')
	   || ' body-tree ' || coalesce(pg_temp.tree(to_jsonb(p) ->> 'prosqlbody'), '')  -- no prosqlbody before 14
	   || E'\n' || CASE WHEN p.prokind IN ('a', 'w') THEN 'aggregate' ELSE pg_get_functiondef(p.oid) END
  FROM pg_proc p WHERE p.pronamespace = 'dlock'::regnamespace ORDER BY p.oid::regprocedure::text;

-- types, operators and anything else the schema could hold
SELECT 'type ' || t.oid::regtype || ' kind ' || t.typtype::text || ' owner ' || pg_get_userbyid(t.typowner)
	   || ' acl ' || coalesce(t.typacl::text, '') || ' comment ' || coalesce(obj_description(t.oid, 'pg_type'), '')
  FROM pg_type t WHERE t.typnamespace = 'dlock'::regnamespace ORDER BY 1;
SELECT 'operator ' || o.oid::regoperator FROM pg_operator o WHERE o.oprnamespace = 'dlock'::regnamespace ORDER BY 1;
SELECT 'cast ' || format_type(c.castsource, NULL) || ' ' || format_type(c.casttarget, NULL)
  FROM pg_cast c WHERE c.oid >= 16384 ORDER BY 1;

-- privileges as the extension recorded them (pg_dump restores these), and default privileges
SELECT 'initprivs ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' ' || i.privtype::text || ' '
	   || coalesce(i.initprivs::text, '')
  FROM pg_init_privs i WHERE i.objoid >= 16384 ORDER BY 1;
SELECT 'defaultacl ' || d.defaclobjtype::text || ' ' || coalesce(d.defaclnamespace::regnamespace::text, '') || ' ' || d.defaclacl::text
  FROM pg_default_acl d ORDER BY 1;
