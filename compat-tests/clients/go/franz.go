// franz.go: the scenario's client interface on github.com/twmb/franz-go (kgo for produce/consume, kadm for
// the admin API). franz-go produces with idempotence by default (InitProducerId); nothing here turns it off.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type franz struct {
	pid  string // producer id and epoch of the last produce
	seed string // bootstrap: host:port[,host:port...]
	cl   *kgo.Client
	adm  *kadm.Client
}

func newFranz(seed string) (client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seed, ",")...))
	if err != nil {
		return nil, err
	}
	return &franz{seed: seed, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (f *franz) name() string        { return "franz-go" }
func (f *franz) modulePath() string  { return "github.com/twmb/franz-go" }
func (f *franz) codecs() []string    { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }
func (f *franz) idempotence() string { return f.pid }
func (f *franz) close()              { f.cl.Close() }

func franzCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %s", codec)
}

func (f *franz) createTopic(ctx context.Context, topic string, partitions int, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		v := v
		cfg[k] = &v
	}
	_, err := f.adm.CreateTopic(ctx, int32(partitions), 1, cfg, topic)
	return err
}

func (f *franz) producer(codec string, extra ...kgo.Opt) (*kgo.Client, error) {
	c, err := franzCodec(codec)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(f.seed, ",")...), kgo.ProducerBatchCompression(c), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond)}, extra...)
	return kgo.NewClient(opts...)
}

func (f *franz) produce(ctx context.Context, topic, codec string, recs []rec) error {
	p, err := f.producer(codec)
	if err != nil {
		return err
	}
	defer p.Close()
	const batch = 500
	for i := 0; i < len(recs); i += batch {
		end := min(i+batch, len(recs))
		krs := make([]*kgo.Record, 0, end-i)
		for _, r := range recs[i:end] {
			kr := &kgo.Record{Topic: topic, Key: []byte(r.key), Value: r.value}
			for _, h := range r.headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.key, Value: []byte(h.value)})
			}
			krs = append(krs, kr)
		}
		if err := p.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			return fmt.Errorf("records %d..%d: %w", i, end-1, err)
		}
	}
	// franz-go is idempotent by default, but goes on without a producer id when the broker has no
	// InitProducerId; say which it was
	id, epoch, err := p.ProducerID(ctx)
	switch {
	case err != nil:
		f.pid = "idempotence on, producer id error: " + err.Error()
	case id < 0:
		f.pid = "idempotence requested, but no producer id (broker without InitProducerId): produced non-idempotent"
	default:
		f.pid = fmt.Sprintf("idempotent (producer id %d, epoch %d)", id, epoch)
	}
	return nil
}

func (f *franz) produceOne(ctx context.Context, topic string, key, value []byte) error {
	p, err := f.producer("none")
	if err != nil {
		return err
	}
	defer p.Close()
	return p.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}).FirstErr()
}

type franzMember struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func (f *franz) newMember(id, group, topic string, out chan<- consumed, gate <-chan struct{}) (member, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.seed, ",")...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &franzMember{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		select { // the group joins meanwhile; fetched data stays buffered until the first poll
		case <-gate:
		case <-ctx.Done():
			return
		}
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					fmt.Printf("    %s fetch error %s/%d: %v\n", id, t, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				hs := make([]header, 0, len(r.Headers))
				for _, h := range r.Headers {
					hs = append(hs, header{h.Key, string(h.Value)})
				}
				pr, _ := parseRec(r.Key, r.Value, hs, "franz-go")
				out <- consumed{member: id, partition: r.Partition, offset: r.Offset, rec: pr}
			})
		}
	}()
	return m, nil
}

func (m *franzMember) commit(ctx context.Context) error { return m.cl.CommitUncommittedOffsets(ctx) }

func (m *franzMember) close() {
	m.stop()
	<-m.done
	m.cl.Close()
}

func (f *franz) describeGroup(ctx context.Context, group, topic string) (groupInfo, error) {
	lags, err := f.adm.Lag(ctx, group)
	if err != nil {
		return groupInfo{}, err
	}
	l, ok := lags[group]
	if !ok {
		return groupInfo{}, fmt.Errorf("group %s not in the Lag answer", group)
	}
	if err := l.Error(); err != nil {
		return groupInfo{}, err
	}
	gi := groupInfo{state: l.State, members: len(l.Members), commits: map[int32]int64{}}
	for p, ml := range l.Lag[topic] {
		if ml.Err != nil {
			return gi, fmt.Errorf("lag of partition %d: %w", p, ml.Err)
		}
		gi.lag += ml.Lag
		if ml.Commit.At >= 0 {
			gi.commits[p] = ml.Commit.At
		}
	}
	return gi, nil
}

func (f *franz) listOffsets(ctx context.Context, topic string, which int64) (map[int32]int64, error) {
	var lo kadm.ListedOffsets
	var err error
	switch which {
	case -2:
		lo, err = f.adm.ListStartOffsets(ctx, topic)
	case -1:
		lo, err = f.adm.ListEndOffsets(ctx, topic)
	default:
		lo, err = f.adm.ListOffsetsAfterMilli(ctx, which, topic)
	}
	if err != nil {
		return nil, err
	}
	res := map[int32]int64{}
	for p, o := range lo[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, o.Err)
		}
		res[p] = o.Offset
	}
	return res, nil
}

func (f *franz) outOfRangeNone(ctx context.Context, topic string, offset int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.seed, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		if fs.NumRecords() > 0 {
			return nil
		}
	}
	return nil
}

func (f *franz) outOfRangeEarliest(ctx context.Context, topic string, offset int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.seed, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && !errors.Is(errs[0].Err, context.DeadlineExceeded) {
			return -1, errs[0].Err
		}
		if fs.NumRecords() > 0 {
			return fs.Records()[0].Offset, nil
		}
	}
	return -1, ctx.Err()
}

func (f *franz) readBack(ctx context.Context, topic string, n int) ([]consumed, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.seed, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []consumed
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && ctx.Err() == nil {
			return got, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			hs := make([]header, 0, len(r.Headers))
			for _, h := range r.Headers {
				hs = append(hs, header{h.Key, string(h.Value)})
			}
			pr, _ := parseRec(r.Key, r.Value, hs, "franz-go")
			got = append(got, consumed{member: "reader", partition: r.Partition, offset: r.Offset, rec: pr})
		})
	}
	return got, nil
}
