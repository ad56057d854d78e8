package gate

import (
	"github.com/gin-gonic/gin"
)

// state is what the gate knows of the request in flight on a gated route.
type state struct {
	route, policy string
	asked         bool
}

const stateKey = "geogate.gate"

func stateOf(c *gin.Context) *state {
	v, ok := c.Get(stateKey)
	if !ok {
		return nil
	}
	return v.(*state)
}

// Route marks the requests of one route as gated under policy (Free:
// checked, never charged). Its handler must call Admit before it answers
// with success; one that does not is reported to Bypassed and logged, so
// that a route added without the gate cannot serve a layer unchecked
// without a test noticing.
func (g *Gate) Route(name, policy string) gin.HandlerFunc {
	return func(c *gin.Context) {
		st := &state{route: name, policy: policy}
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
