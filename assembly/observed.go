package assembly

import (
	"context"
	"errors"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// tenantShapes is one tenant's part of the ledger's observed shapes, as the tenant's Pool
// keeps them (upstream.ShapeStore): every key it makes names the tenant, so no other
// tenant's Pool reads or adds to them.
type tenantShapes struct {
	ledger budget.ObservedShapes
	tenant string
}

// shapeStore is the ShapeStore of tenant's Pool: nil (kept in memory only) without a ledger.
func shapeStore(l budget.Ledger, tenant string) upstream.ShapeStore {
	if l == nil {
		return nil
	}
	return tenantShapes{ledger: l, tenant: tenant}
}

func (s tenantShapes) key(k upstream.ShapeKey) budget.ShapeKey {
	return budget.ShapeKey{Tenant: s.tenant, Upstream: k.Server, Tool: k.Tool, Definition: k.Definition}
}

func (s tenantShapes) LoadShape(ctx context.Context, key upstream.ShapeKey) (int, []byte, bool, error) {
	o, err := s.ledger.ObservedShape(ctx, s.key(key))
	if errors.Is(err, budget.ErrNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, err
	}
	return o.Samples, o.Shape, true, nil
}

func (s tenantShapes) MergeShape(ctx context.Context, key upstream.ShapeKey, merge func(int, []byte) (int, []byte, error)) (int, []byte, error) {
	o, err := s.ledger.MergeObservedShape(ctx, s.key(key), func(old budget.ObservedShape) (budget.ObservedShape, error) {
		n, summary, err := merge(old.Samples, old.Shape)
		return budget.ObservedShape{Samples: n, Shape: summary}, err
	})
	return o.Samples, o.Shape, err
}
