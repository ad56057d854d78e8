package main

import "strings"

// guardedBy is, from the route table rs, the routes that spend each
// policy and those that read a layer (gate.Spend.Layers), for
// GET /rate_limit.
func guardedBy(rs []route) (guards map[string][]string, layerRoutes []string) {
	guards = map[string][]string{}
	for _, rt := range rs {
		if rt.policy == ungated {
			continue
		}
		name := rt.method + " " + templatePath(rt.path)
		for _, p := range rt.policy.Policies() {
			guards[p] = append(guards[p], name)
		}
		if rt.policy.Layers {
			layerRoutes = append(layerRoutes, name)
		}
	}
	return guards, layerRoutes
}

// templatePath writes a Gin path as the API description does:
// /geofences/{id} for /geofences/:id.
func templatePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}
