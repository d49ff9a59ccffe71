-- SPDX-License-Identifier: GPL-2.0-or-later
-- The fleet's datasets as views, for the queries beside this file. Set the output directory
-- first (iscsi_doctor_fleet.py query does):  SET VARIABLE fleet = '/archive/fleet';
-- Day partitions are read as DATE whatever the partition values look like.
CREATE OR REPLACE VIEW commands AS SELECT * FROM read_parquet(
  getvariable('fleet') || '/commands/*/*.parquet', hive_partitioning = true, hive_types = {'day': DATE});
CREATE OR REPLACE VIEW findings AS SELECT * FROM read_parquet(
  getvariable('fleet') || '/findings/*/*.parquet', hive_partitioning = true, hive_types = {'day': DATE});
CREATE OR REPLACE VIEW captures AS SELECT * FROM read_parquet(
  getvariable('fleet') || '/captures/*/*.parquet', hive_partitioning = true, hive_types = {'day': DATE});
CREATE OR REPLACE VIEW summary_luns AS SELECT * FROM read_parquet(
  getvariable('fleet') || '/summary/luns/*/*.parquet', hive_partitioning = true, hive_types = {'day': DATE});
CREATE OR REPLACE VIEW summary_kinds AS SELECT * FROM read_parquet(
  getvariable('fleet') || '/summary/kinds/*/*.parquet', hive_partitioning = true, hive_types = {'day': DATE});
