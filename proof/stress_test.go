package proof_test

import (
	"context"
	"errors"

	"gatehouse/ledger"
)

func playStress(ctx context.Context, l *ledger.Ledger, dest ledger.Destination) error {
	return errors.New("todo")
}
