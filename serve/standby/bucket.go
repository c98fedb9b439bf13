package standby

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/jsreplicas"
)

// LeaseBucketMinTTL is the shortest expiry LeaseBucket gives its entries.
const LeaseBucketMinTTL = time.Second

// LeaseBucket creates (or updates) the key-value bucket of leases named
// bucket: one entry per lease, kept only max(ttl, LeaseBucketMinTTL) after
// its last renewal. File storage keeps a lease across a NATS server
// restart; as many replicas as the cluster places now, up to
// jsreplicas.Max and never fewer than the bucket has, keep it across the
// loss of a node.
func LeaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, _, err := leaseBucket(ctx, js, bucket, ttl, jsreplicas.Max, 1)
	return kv, err
}

// leaseBucket creates (or updates) the lease bucket with want replicas,
// or fewer down to lowest while the cluster cannot place them, never
// fewer than it has (jsreplicas.Raise).
func leaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, want, lowest int) (jetstream.KeyValue, jsreplicas.Placement, error) {
	p := jsreplicas.Placement{Want: want}
	if ttl <= 0 {
		return nil, p, fmt.Errorf("standby: lease bucket %s: TTL %v not positive", bucket, ttl)
	}
	ttl = max(ttl, LeaseBucketMinTTL)
	have, err := bucketReplicas(ctx, js, bucket)
	if err != nil {
		return nil, p, fmt.Errorf("standby: lease bucket %s: %w", bucket, err)
	}
	var kv jetstream.KeyValue
	p, err = jsreplicas.Raise(have, want, lowest, func(replicas int) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "predictord hot-standby leases",
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
		return err
	})
	if err != nil {
		return nil, p, fmt.Errorf("standby: lease bucket %s: %w", bucket, err)
	}
	return kv, p, nil
}

// bucketReplicas returns the replicas of a key-value bucket's stream, 0
// when there is no such bucket. The account's information comes first: a
// server without JetStream answers it at once (ErrJetStreamNotEnabled),
// the stream's not.
func bucketReplicas(ctx context.Context, js jetstream.JetStream, bucket string) (int, error) {
	if _, err := js.AccountInfo(ctx); err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, "KV_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().Config.Replicas, nil
}

// openLeaseBucket opens the lease bucket at start-up with want replicas.
// While JetStream cannot answer yet, or the cluster cannot place them yet
// (jsreplicas.Forming: too few peers current in its meta group, as while
// it forms), it retries with backoff for up to wait; then it takes as
// many as the cluster places, never fewer than the bucket has, and the
// Placement's Short says why not more. A bucket with fewer replicas than
// want is raised to want.
func openLeaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, want int, wait time.Duration,
	warn func(error)) (jetstream.KeyValue, jsreplicas.Placement, error) {
	var kv jetstream.KeyValue
	var p jsreplicas.Placement
	err := retryStart(ctx, wait, warn, func(ctx context.Context) (err error) {
		kv, p, err = leaseBucket(ctx, js, bucket, ttl, want, want)
		return err
	})
	if err == nil || !jsreplicas.Unplaceable(err) {
		return kv, p, err
	}
	return leaseBucket(ctx, js, bucket, ttl, want, 1)
}
