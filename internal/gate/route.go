package gate

import (
	"slices"

	"github.com/gin-gonic/gin"
)

// Spend is what a gated route spends, as its row in the route table says:
// each row alone says all of it.
type Spend struct {
	// Policy is spent for the route's work; Free: the gate checks the
	// layers but charges nothing.
	Policy string
	// Cached, when set, is spent instead of Policy for what the handler
	// serves from a cache (Ask.Cached): a tile found in the tile cache.
	Cached string
	// Layers says the handler names the layers it reads or writes, and
	// so a layer's own policy (the layer file's) may take the place of
	// Policy for that layer's share. A handler that names layers on a
	// route that does not say so is reported, as a bypass is.
	Layers bool
}

// Policies are the policies s may charge, each once.
func (s Spend) Policies() []string {
	var out []string
	for _, p := range []string{s.Policy, s.Cached} {
		if p != Free && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// policy is the policy a request asking a spends.
func (s Spend) policy(a Ask) string {
	if a.Cached && s.Cached != "" {
		return s.Cached
	}
	return s.Policy
}

// state is what the gate knows of the request in flight on a gated route.
type state struct {
	route string
	spend Spend
	asked bool
}

const stateKey = "geogate.gate"

func stateOf(c *gin.Context) *state {
	v, ok := c.Get(stateKey)
	if !ok {
		return nil
	}
	return v.(*state)
}

// Route marks the requests of one route as gated, spending s. Its handler
// must call Admit before it answers with success; one that does not is
// reported to Bypassed and logged, so that a route added without the gate
// cannot serve a layer unchecked without a test noticing.
func (g *Gate) Route(name string, s Spend) gin.HandlerFunc {
	return func(c *gin.Context) {
		st := &state{route: name, spend: s}
		c.Set(stateKey, st)
		c.Next()
		if st.asked || c.Writer.Status() >= 400 {
			return
		}
		g.log.Error("gate: a gated route answered without asking the gate", "route", name, "status", c.Writer.Status())
		if g.Bypassed != nil {
			g.Bypassed(name)
		}
	}
}
