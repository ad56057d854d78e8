-- The demo's table opened for writing (configs/demo-layers.yaml): the
-- README's OGC API Features Part 4 walk-through creates, changes and
-- deletes its features. Empty; safe to run again.
CREATE TABLE IF NOT EXISTS public.sites (id int PRIMARY KEY, name text, geom geometry(Point, 4326));
CREATE INDEX IF NOT EXISTS sites_geom_idx ON public.sites USING gist (geom);
