/* sql/pg_dlock--1.0--1.1.sql -- pg_dlock 1.0 to 1.1 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION pg_dlock UPDATE TO '1.1'" to load this file. \quit

/*
 * CREATE EXTENSION pg_dlock installs 1.1 by running pg_dlock--1.0.sql and then
 * this script, so a new installation and an upgraded one are the same by
 * construction. Every change to the installed SQL from 1.0 on goes here (and
 * into a new step script for the release after).
 */
