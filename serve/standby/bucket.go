package standby

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/jsreplicas"
	"rgcpred/serve/jsstart"
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

// leaseBucket creates (or updates) the lease bucket in one try with want
// replicas, or fewer down to lowest while the cluster cannot place them,
// never fewer than it has (jsstart.Place).
func leaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, want, lowest int) (jetstream.KeyValue, jsreplicas.Placement, error) {
	p := jsreplicas.Placement{Want: want}
	if ttl <= 0 {
		return nil, p, fmt.Errorf("standby: lease bucket %s: TTL %v not positive", bucket, ttl)
	}
	var kv jetstream.KeyValue
	p, err := jsstart.Place(ctx, js, "KV_"+bucket, want, lowest, func(ctx context.Context, replicas int) (err error) {
		kv, err = createLeaseBucket(ctx, js, bucket, ttl, replicas)
		return err
	})
	if err != nil {
		return nil, p, fmt.Errorf("standby: lease bucket %s: %w", bucket, err)
	}
	return kv, p, nil
}

// createLeaseBucket creates or updates the lease bucket with replicas.
func createLeaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "predictord hot-standby leases",
		History:     1,
		TTL:         max(ttl, LeaseBucketMinTTL),
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
}

// openLeaseBucket opens the lease bucket at start-up with want replicas,
// waiting up to wait for JetStream to answer and the cluster to place
// them (jsstart.Open): never fewer than the bucket has, and a bucket
// with fewer is raised to want.
func openLeaseBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, want int, wait time.Duration,
	warn func(error)) (jetstream.KeyValue, jsreplicas.Placement, error) {
	if ttl <= 0 {
		return nil, jsreplicas.Placement{Want: want}, fmt.Errorf("standby: lease bucket %s: TTL %v not positive", bucket, ttl)
	}
	var kv jetstream.KeyValue
	p, err := jsstart.Open(ctx, js, "KV_"+bucket, want, wait, warn, func(ctx context.Context, replicas int) (err error) {
		kv, err = createLeaseBucket(ctx, js, bucket, ttl, replicas)
		return err
	})
	if err != nil {
		return nil, p, fmt.Errorf("standby: lease bucket %s: %w", bucket, err)
	}
	return kv, p, nil
}
