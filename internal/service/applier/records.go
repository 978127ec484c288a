package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/readmodel"
)

// History bounds of a [readmodel.Record].
const (
	maxPlans   = 32
	maxApplied = 32
	maxHandled = 64
)

func push(list []string, v string, limit int) []string {
	if slices.Contains(list, v) {
		return list
	}
	list = append(list, v)
	if len(list) > limit {
		list = list[len(list)-limit:]
	}
	return list
}

// records reads and writes the applier's [readmodel.Record]s in lava-state.
type records struct {
	kv jetstream.KeyValue
}

// load returns the record of a resource (an empty one when absent) and the revision it was
// read at (0 when absent), which save's compare-and-set expects.
func (r records) load(ctx context.Context, namespace, name string) (*readmodel.Record, uint64, error) {
	return readmodel.ReadRecord(ctx, r.kv, namespace, name)
}

// save writes rec with a compare-and-set on revision, the one it was read at (0: create).
func (r records) save(ctx context.Context, namespace, name string, rec *readmodel.Record, revision uint64) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("applier: encode record of %s/%s: %w", namespace, name, err)
	}
	key := readmodel.RecordKey(namespace, name)
	if revision == 0 {
		_, err = r.kv.Create(ctx, key, b)
	} else {
		_, err = r.kv.Update(ctx, key, b, revision)
	}
	if err != nil {
		return fmt.Errorf("applier: write record of %s/%s: %w", namespace, name, err)
	}
	return nil
}
