-- A team's own PostGIS database, as geogate meets it when it is adopted:
-- tables, views and a materialized view of its own shapes, in SRIDs other
-- than 4326, with its own keys, column types and awkward names, made from
-- the demo cities and countries (so that its features are where real ones
-- are) next to geogate's own tables. Every name is written with its schema:
-- the test role is called geogate, so its search_path ("$user", public)
-- would otherwise create them in geogate's own schema.

CREATE SCHEMA transit;
CREATE SCHEMA "Mixed Case";

-- Lines in Web Mercator: each German city joined to its nearest German
-- neighbour. A serial key, a smallint, a boolean, a date and jsonb.
CREATE TABLE public.roads (
    gid    serial PRIMARY KEY,
    ref    text NOT NULL,
    lanes  smallint,
    oneway boolean,
    opened date,
    tags   jsonb,
    geom   geometry(LineString, 3857) NOT NULL
);
INSERT INTO public.roads (ref, lanes, oneway, opened, tags, geom)
SELECT 'R' || p.id, 1 + p.id % 4, p.id % 3 = 0, date '2000-01-01' + (p.id % 9000)::int,
       jsonb_build_object('surface', CASE WHEN p.id % 2 = 0 THEN 'asphalt' ELSE 'gravel' END,
                          'maxspeed', 30 + 10 * (p.id % 10), 'bridges', jsonb_build_array(p.id % 3, p.id % 5)),
       ST_Transform(ST_MakeLine(p.geom, n.geom), 3857)
FROM public.places p
CROSS JOIN LATERAL (
    SELECT q.geom FROM public.places q
    WHERE q.id <> p.id AND q.properties->>'country' = 'DE'
    ORDER BY q.geom <-> p.geom LIMIT 1
) n
WHERE p.properties->>'country' = 'DE';
CREATE INDEX roads_geom_idx ON public.roads USING gist (geom);

-- Points in UTM zone 33N (metres), keyed by text, in a schema of their
-- own with a name that needs quoting; a text array and a timestamptz.
CREATE TABLE transit."Bus Stops" (
    stop_code  text PRIMARY KEY,
    "Name"     text NOT NULL,
    wheelchair boolean,
    routes     text[],
    updated    timestamptz,
    geom       geometry(Point, 32633) NOT NULL
);
INSERT INTO transit."Bus Stops"
SELECT 'S-' || lpad(id::text, 7, '0'), name, id % 2 = 0, ARRAY['M' || (id % 7), 'N' || (id % 3)],
       timestamptz '2024-03-01 06:00:00+00' + (id % 1000) * interval '1 hour', ST_Transform(geom, 32633)
FROM public.places
WHERE ST_X(geom) BETWEEN 12 AND 18 AND ST_Y(geom) BETWEEN 0 AND 84;
CREATE INDEX bus_stops_geom_idx ON transit."Bus Stops" USING gist (geom);

-- Multipolygons in the New York Long Island state plane, in US feet: a
-- grid of 60 x 60 parcels of 400 ft around Manhattan, a numeric area.
CREATE TABLE public.parcels (
    parcel_id bigint PRIMARY KEY,
    owner     text,
    area_sqft numeric(12, 2),
    assessed  double precision,
    geom      geometry(MultiPolygon, 2263) NOT NULL
);
INSERT INTO public.parcels
SELECT i * 1000 + j, 'owner ' || ((i * 7 + j) % 50), 400 * 400, 1000.5 * (i + j),
       ST_Multi(ST_MakeEnvelope(x0 + i * 420, y0 + j * 420, x0 + i * 420 + 400, y0 + j * 420 + 400, 2263))
FROM generate_series(0, 59) AS i, generate_series(0, 59) AS j,
     (SELECT ST_X(c) - 12000 AS x0, ST_Y(c) - 12000 AS y0
      FROM ST_Transform(ST_SetSRID(ST_Point(-73.9857, 40.7484), 4326), 2263) AS c) o;
CREATE INDEX parcels_geom_idx ON public.parcels USING gist (geom);

-- A view of the French cities, with a computed column, and a view whose
-- geometry is an expression with no SRID in its type.
CREATE VIEW public.french_cities AS
SELECT id, name, properties->>'admin1' AS region, geom FROM public.places WHERE properties->>'country' = 'FR';
CREATE VIEW public.city_buffers AS
SELECT id, name, ST_Buffer(geom, 0.01) AS geom FROM public.places WHERE properties->>'country' = 'LU';

-- A materialized view: one point per country, with a count.
CREATE MATERIALIZED VIEW public.country_centres AS
SELECT properties->>'country' AS country, count(*) AS cities,
       ST_Centroid(ST_Collect(geom))::geometry(Point, 4326) AS geom
FROM public.places GROUP BY 1;
CREATE UNIQUE INDEX country_centres_country_idx ON public.country_centres (country);
CREATE INDEX country_centres_geom_idx ON public.country_centres USING gist (geom);

-- A table without a primary key.
CREATE TABLE public.sightings (
    species text,
    seen    timestamptz,
    geom    geometry(Point, 4326)
);
INSERT INTO public.sightings
SELECT (ARRAY['fox', 'owl', 'deer', 'hare'])[1 + id % 4], timestamptz '2025-05-01 00:00:00+00' + id * interval '1 minute', geom
FROM public.places WHERE id % 40 = 0;
CREATE INDEX sightings_geom_idx ON public.sightings USING gist (geom);

-- A geography column, keyed by a fixed-width text code.
CREATE TABLE public.airports (
    iata        char(3) PRIMARY KEY,
    name        text NOT NULL,
    elevation_m integer,
    geog        geography(Point, 4326) NOT NULL
);
INSERT INTO public.airports
SELECT chr((65 + (n / 676) % 26)::int) || chr((65 + (n / 26) % 26)::int) || chr((65 + n % 26)::int), name, (id % 3000)::int, geom::geography
FROM (SELECT row_number() OVER (ORDER BY id) - 1 AS n, id, name, geom FROM public.places WHERE id % 85 = 0) s
WHERE n < 17576;
CREATE INDEX airports_geog_idx ON public.airports USING gist (geog);

-- Names that need quoting everywhere: a schema with a space and capitals,
-- a reserved word as table name, reserved and mixed-case column names,
-- and two geometry columns in one table.
CREATE TABLE "Mixed Case"."select" (
    "Order"        integer PRIMARY KEY,
    "from"         text,
    "Where Clause" text,
    outline        geometry(Polygon, 4326),
    centroid       geometry(Point, 4326)
);
INSERT INTO "Mixed Case"."select"
SELECT id::int, name, 'country = ' || name, ST_GeometryN(geom, 1), ST_PointOnSurface(geom)
FROM public.geofences WHERE ST_NumGeometries(geom) >= 1 AND id <= 60;
CREATE INDEX select_outline_idx ON "Mixed Case"."select" USING gist (outline);

-- One million points spread over the land: a city each, moved at random
-- within about 50 km, with a value to thin and filter by.
SELECT setseed(0.16);
CREATE TABLE public.million (
    id    bigint PRIMARY KEY,
    value integer NOT NULL,
    geom  geometry(Point, 4326) NOT NULL
);
INSERT INTO public.million
SELECT g, (random() * 1000)::int,
       ST_SetSRID(ST_Point(
           greatest(-180, least(180, ST_X(p.geom) + (random() - 0.5))),
           greatest(-85, least(85, ST_Y(p.geom) + (random() - 0.5)))), 4326)
FROM generate_series(1, 1000000) AS g
JOIN public.places p ON p.id = 1 + (g::bigint * 7919) % (SELECT count(*) FROM public.places);
CREATE INDEX million_geom_idx ON public.million USING gist (geom);

-- Countries as a team keeps them: multipolygons in Web Mercator, cut at
-- 85 degrees of latitude where the projection ends, keyed by a text code;
-- some of them have thousands of vertices.
CREATE TABLE public.countries (
    iso3       text PRIMARY KEY,
    label      text NOT NULL,
    population bigint,
    geom       geometry(MultiPolygon, 3857) NOT NULL
);
INSERT INTO public.countries
SELECT name, 'Country ' || name, id * 1000,
       ST_Multi(ST_CollectionExtract(ST_Transform(ST_Intersection(geom, ST_MakeEnvelope(-180, -85, 180, 85, 4326)), 3857), 3))
FROM public.geofences
WHERE NOT ST_IsEmpty(ST_Intersection(geom, ST_MakeEnvelope(-180, -85, 180, 85, 4326)));
CREATE INDEX countries_geom_idx ON public.countries USING gist (geom);

-- Zones on the sphere: geography polygons, whose edges are great circles
-- (the southern edge of a zone between two points at 50 degrees north
-- runs north of that parallel).
CREATE TABLE public.zones (
    zone_id integer PRIMARY KEY,
    label   text NOT NULL,
    geog    geography(Polygon, 4326) NOT NULL
);
INSERT INTO public.zones VALUES
    (1, 'wide north', 'SRID=4326;POLYGON((0 50, 40 50, 40 60, 0 60, 0 50))'),
    (3, 'small', 'SRID=4326;POLYGON((2.2 48.8, 2.5 48.8, 2.5 48.9, 2.2 48.9, 2.2 48.8))'),
    (4, 'overlap', 'SRID=4326;POLYGON((10 45, 30 45, 30 55, 10 55, 10 45))');
CREATE INDEX zones_geog_idx ON public.zones USING gist (geog);

-- Geometries of every kind in one generic column: squares, their centre
-- points, lines across them, a collection holding a polygon, and small
-- circles around the cities of Luxembourg.
CREATE TABLE public.landmarks (
    id   integer PRIMARY KEY,
    kind text NOT NULL,
    geom geometry(Geometry, 4326) NOT NULL
);
INSERT INTO public.landmarks
SELECT i, 'square', ST_MakeEnvelope(i, 10, i + 1, 11, 4326) FROM generate_series(0, 9) AS i
UNION ALL SELECT 100 + i, 'centre', ST_SetSRID(ST_Point(i + 0.5, 10.5), 4326) FROM generate_series(0, 9) AS i
UNION ALL SELECT 200 + i, 'line', ST_SetSRID(ST_MakeLine(ST_Point(i, 10.25), ST_Point(i + 1, 10.25)), 4326) FROM generate_series(0, 9) AS i
UNION ALL SELECT 300, 'collection', ST_Collect(ST_SetSRID(ST_Point(20.5, 10.5), 4326), ST_MakeEnvelope(20, 10, 21, 11, 4326))
UNION ALL SELECT 400 + id::int, 'circle', ST_Buffer(geom, 0.02, 8) FROM public.places WHERE properties->>'country' = 'LU';
CREATE INDEX landmarks_geom_idx ON public.landmarks USING gist (geom);

ANALYZE;
