package sourcerules

import (
	"go/ast"
	"go/types"
	"testing"
)

// isDestinationSend reports whether fn is a Send method with
// destination.Destination's signature: Send(context.Context, destination.Message)
// (destination.Receipt, error), on the interface or on any implementation.
func isDestinationSend(fn *types.Func) bool {
	if fn.Name() != "Send" {
		return false
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil || sig.Params().Len() != 2 || sig.Results().Len() != 2 {
		return false
	}
	named := func(t types.Type, pkg, name string) bool {
		n, ok := types.Unalias(t).(*types.Named)
		if !ok || n.Obj().Name() != name {
			return false
		}
		if n.Obj().Pkg() == nil {
			return pkg == ""
		}
		return n.Obj().Pkg().Path() == pkg
	}
	return named(sig.Params().At(0).Type(), "context", "Context") &&
		named(sig.Params().At(1).Type(), "gatehouse/destination", "Message") &&
		named(sig.Results().At(0).Type(), "gatehouse/destination", "Receipt") &&
		named(sig.Results().At(1).Type(), "", "error")
}

// TestOnlyDeliverCallsSend fails when production code other than
// Ledger.Deliver hands a message to a destination (calls or takes the
// method value of a Destination's Send). A Send method that forwards to an
// inner destination is a wrapper, not a second send path, and is allowed;
// test files are not production code and are not read.
func TestOnlyDeliverCallsSend(t *testing.T) {
	m := loadModule(t)
	var deliver, forwarders []string
	for _, p := range m.pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				s := p.info.Selections[sel]
				if s == nil {
					return true
				}
				fn, ok := s.Obj().(*types.Func)
				if !ok || !isDestinationSend(fn) {
					return true
				}
				decl, name := enclosingFunc(f, sel.Pos())
				site := m.rel(sel.Pos()) + " in " + p.path + "." + name
				switch {
				case p.path == "gatehouse/ledger" && name == "Ledger.Deliver":
					deliver = append(deliver, site)
				case decl != nil && decl.Recv != nil && isDestinationSend(p.info.Defs[decl.Name].(*types.Func)):
					forwarders = append(forwarders, site)
				default:
					t.Errorf("%s calls Destination.Send; only Ledger.Deliver may hand a message to a destination (compose BeginAttempt, Deliver and RecordDelivery instead)", site)
				}
				return true
			})
		}
	}
	if len(deliver) != 1 {
		t.Errorf("Ledger.Deliver calls Send at %v; want exactly one call site", deliver)
	}
	for _, s := range deliver {
		t.Logf("send path: %s", s)
	}
	for _, s := range forwarders {
		t.Logf("wrapper forwarding to an inner destination: %s", s)
	}
}
