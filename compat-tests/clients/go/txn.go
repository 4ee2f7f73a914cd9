// txn.go: step 7 (transactions, ../README.md) for the Go clients. One transactional producer commits 20
// records, aborts 20, commits 20; a read_committed reader sees exactly the 40 committed records and a
// read_uncommitted one all 60; then a consume-transform-produce pass copies the committed records to a second
// topic with the consumed offsets in each transaction, and the group's committed offsets end at the source's
// end. franz-go: kgo.TransactionalID + Begin/EndTransaction, the pass with kgo.GroupTransactSession (a group
// member, KIP-447's generation-checked TxnOffsetCommit). sarama: Producer.Transaction.ID with
// BeginTxn/CommitTxn/AbortTxn, the pass with partition consumers and AddOffsetsToTxn (group id only).
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

type kv struct{ key, value string }

type txnBatch struct {
	recs   []kv
	commit bool
}

// txnClient is what step 7 needs from a client on top of client.
type txnClient interface {
	// txnProduce runs one transaction per batch with transactional id tid, committed or aborted.
	txnProduce(ctx context.Context, topic, tid string, batches []txnBatch) (string, error)
	// readValues reads every partition of topic from the start; readCommitted picks the isolation level.
	// It returns once want records arrived and 1.5 s more passed (a wrong reader would deliver more).
	readValues(ctx context.Context, topic string, readCommitted bool, want int) ([]string, error)
	// ctp copies want committed records of src to dst ("out-" + value) with the offsets of group in each
	// transaction; returns how many it copied.
	ctp(ctx context.Context, src, dst, group, tid string, want int) (int, error)
}

func sortedCopy(v []string) []string {
	c := append([]string(nil), v...)
	sort.Strings(c)
	return c
}

func sameSet(a, b []string) bool {
	a, b = sortedCopy(a), sortedCopy(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// transactions is step 7.
func (s *scenario) transactions(ctx context.Context) (string, error) {
	tc, ok := s.c.(txnClient)
	if !ok {
		return "", notApplicable{s.c.name() + " has no transactional producer here"}
	}
	stamp := time.Now().UnixNano() % 1_000_000_000
	t := fmt.Sprintf("matrix-%s-txn-%d", s.c.name(), stamp)
	t2, g := t+"-out", t+"-group"
	for _, x := range []string{t, t2} {
		if err := s.c.createTopic(ctx, x, 3, nil); err != nil {
			return "", fmt.Errorf("create %s: %w", x, err)
		}
	}
	var batches []txnBatch
	var want []string
	for _, b := range []struct {
		tag    string
		commit bool
	}{{"c1", true}, {"a", false}, {"c2", true}} {
		var recs []kv
		for i := 0; i < 20; i++ {
			recs = append(recs, kv{fmt.Sprintf("k%d", i%10), fmt.Sprintf("tx-%s-%d", b.tag, i)})
		}
		batches = append(batches, txnBatch{recs, b.commit})
		if b.commit {
			for _, r := range recs {
				want = append(want, r.value)
			}
		}
	}
	how, err := tc.txnProduce(ctx, t, t+"-tx", batches)
	if err != nil {
		return "", fmt.Errorf("transactional produce: %w", err)
	}
	rc, err := tc.readValues(ctx, t, true, len(want))
	if err != nil {
		return "", fmt.Errorf("read_committed: %w", err)
	}
	if !sameSet(rc, want) {
		aborted := 0
		for _, v := range rc {
			if strings.HasPrefix(v, "tx-a-") {
				aborted++
			}
		}
		return "", fmt.Errorf("read_committed saw %d records, want the %d committed (%d aborted among them)", len(rc), len(want), aborted)
	}
	ru, err := tc.readValues(ctx, t, false, 60)
	if err != nil {
		return "", fmt.Errorf("read_uncommitted: %w", err)
	}
	if len(ru) != 60 {
		return "", fmt.Errorf("read_uncommitted saw %d records, want 60 (aborted included)", len(ru))
	}
	n, err := tc.ctp(ctx, t, t2, g, t+"-ctp", len(want))
	if err != nil {
		return "", fmt.Errorf("consume-transform-produce: %w", err)
	}
	out, err := tc.readValues(ctx, t2, true, len(want))
	if err != nil {
		return "", fmt.Errorf("read_committed of %s: %w", t2, err)
	}
	var want2 []string
	for _, v := range want {
		want2 = append(want2, "out-"+v)
	}
	if !sameSet(out, want2) {
		return "", fmt.Errorf("consume-transform-produce: read_committed saw %d records in %s, want %d", len(out), t2, len(want))
	}
	ends, err := s.c.listOffsets(ctx, t, -1)
	if err != nil {
		return "", err
	}
	gi, err := s.c.describeGroup(ctx, g, t)
	if err != nil {
		return "", fmt.Errorf("describe group %s: %w", g, err)
	}
	for p, end := range ends { // the record after the last copied is the commit marker: its offset or the end
		if c, ok := gi.commits[p]; end > 0 && (!ok || (c != end-1 && c != end)) {
			return "", fmt.Errorf("group %s committed %v for partition %d, want %d (or %d, past the marker)", g, gi.commits[p], p, end-1, end)
		}
	}
	return fmt.Sprintf("%s: committed 20, aborted 20, committed 20; read_committed saw exactly the %d committed, "+
		"read_uncommitted 60; consume-transform-produce copied %d with the offsets in the transaction, group offsets at the end",
		how, len(want), n), nil
}

// ---- franz-go ---------------------------------------------------------------------------------------

func (f *franz) txnProduce(ctx context.Context, topic, tid string, batches []txnBatch) (string, error) {
	p, err := f.producer("lz4", kgo.TransactionalID(tid))
	if err != nil {
		return "", err
	}
	defer p.Close()
	for _, b := range batches {
		if err := p.BeginTransaction(); err != nil {
			return "", err
		}
		var krs []*kgo.Record
		for _, r := range b.recs {
			krs = append(krs, &kgo.Record{Topic: topic, Key: []byte(r.key), Value: []byte(r.value)})
		}
		if err := p.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			return "", err
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(b.commit)); err != nil {
			return "", fmt.Errorf("EndTransaction(commit=%v): %w", b.commit, err)
		}
	}
	return "kgo.TransactionalID, BeginTransaction/EndTransaction(TryCommit|TryAbort)", nil
}

func (f *franz) readValues(ctx context.Context, topic string, readCommitted bool, want int) ([]string, error) {
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.seed, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return pollValues(ctx, want, func(pctx context.Context) ([]string, error) {
		fs := c.PollFetches(pctx)
		var vs []string
		fs.EachRecord(func(r *kgo.Record) { vs = append(vs, string(r.Value)) })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				return vs, e.Err
			}
		}
		return vs, nil
	})
}

// pollValues calls poll with 300 ms deadlines until want values arrived and 1.5 s more passed, or 20 s.
func pollValues(ctx context.Context, want int, poll func(context.Context) ([]string, error)) ([]string, error) {
	var out []string
	deadline := time.Now().Add(20 * time.Second)
	var quiet time.Time
	for time.Now().Before(deadline) && (quiet.IsZero() || time.Now().Before(quiet)) && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		vs, err := poll(pctx)
		cancel()
		out = append(out, vs...)
		if err != nil {
			return out, err
		}
		if len(out) >= want && quiet.IsZero() {
			quiet = time.Now().Add(1500 * time.Millisecond)
		}
	}
	return out, nil
}

func (f *franz) ctp(ctx context.Context, src, dst, group, tid string, want int) (int, error) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(f.seed, ",")...),
		kgo.TransactionalID(tid), kgo.ConsumerGroup(group), kgo.ConsumeTopics(src),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for n < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollFetches(pctx)
		cancel()
		var krs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			krs = append(krs, &kgo.Record{Topic: dst, Key: r.Key, Value: append([]byte("out-"), r.Value...)})
		})
		if len(krs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return n, err
		}
		if err := sess.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			return n, err
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return n, fmt.Errorf("GroupTransactSession.End: %w", err)
		}
		if committed {
			n += len(krs)
		}
	}
	return n, nil
}

// ---- sarama -----------------------------------------------------------------------------------------

func (s *saramaClient) txnProducer(tid string) (sarama.SyncProducer, error) {
	cfg := saramaConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = tid
	cfg.Net.MaxOpenRequests = 1
	return sarama.NewSyncProducer(strings.Split(s.seed, ","), cfg)
}

func saramaMsgs(topic string, recs []kv) []*sarama.ProducerMessage {
	var ms []*sarama.ProducerMessage
	for _, r := range recs {
		ms = append(ms, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value)})
	}
	return ms
}

func (s *saramaClient) txnProduce(ctx context.Context, topic, tid string, batches []txnBatch) (string, error) {
	p, err := s.txnProducer(tid)
	if err != nil {
		return "", err
	}
	defer p.Close()
	for _, b := range batches {
		if err := p.BeginTxn(); err != nil {
			return "", fmt.Errorf("BeginTxn: %w", err)
		}
		if err := p.SendMessages(saramaMsgs(topic, b.recs)); err != nil {
			return "", err
		}
		if b.commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			return "", fmt.Errorf("end transaction (commit=%v): %w", b.commit, err)
		}
	}
	return "Producer.Transaction.ID, BeginTxn/CommitTxn/AbortTxn", nil
}

// partitionConsumers consumes every partition of topic from the start into one channel.
func (s *saramaClient) partitionConsumers(topic string, readCommitted bool) (sarama.Consumer, <-chan *sarama.ConsumerMessage, error) {
	cfg := saramaConfig()
	if readCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	c, err := sarama.NewConsumer(strings.Split(s.seed, ","), cfg)
	if err != nil {
		return nil, nil, err
	}
	parts, err := s.partitions(topic)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	ch := make(chan *sarama.ConsumerMessage, 256)
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		go func() {
			for m := range pc.Messages() {
				ch <- m
			}
		}()
	}
	return c, ch, nil
}

func (s *saramaClient) readValues(ctx context.Context, topic string, readCommitted bool, want int) ([]string, error) {
	c, ch, err := s.partitionConsumers(topic, readCommitted)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return pollValues(ctx, want, func(pctx context.Context) ([]string, error) {
		var vs []string
		for {
			select {
			case m := <-ch:
				vs = append(vs, string(m.Value))
			case <-pctx.Done():
				return vs, nil
			}
		}
	})
}

func (s *saramaClient) ctp(ctx context.Context, src, dst, group, tid string, want int) (int, error) {
	c, ch, err := s.partitionConsumers(src, true)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	p, err := s.txnProducer(tid)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for n < want && time.Now().Before(deadline) {
		var batch []*sarama.ConsumerMessage
		timer := time.After(300 * time.Millisecond)
	collect:
		for {
			select {
			case m := <-ch:
				batch = append(batch, m)
			case <-timer:
				break collect
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := p.BeginTxn(); err != nil {
			return n, fmt.Errorf("BeginTxn: %w", err)
		}
		var ms []*sarama.ProducerMessage
		next := map[int32]int64{}
		for _, m := range batch {
			ms = append(ms, &sarama.ProducerMessage{Topic: dst, Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(append([]byte("out-"), m.Value...))})
			next[m.Partition] = m.Offset + 1
		}
		if err := p.SendMessages(ms); err != nil {
			return n, err
		}
		var offs []*sarama.PartitionOffsetMetadata
		for part, o := range next {
			offs = append(offs, &sarama.PartitionOffsetMetadata{Partition: part, Offset: o})
		}
		if err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{src: offs}, group); err != nil {
			return n, fmt.Errorf("AddOffsetsToTxn: %w", err)
		}
		if err := p.CommitTxn(); err != nil {
			return n, fmt.Errorf("CommitTxn: %w", err)
		}
		n += len(batch)
	}
	return n, nil
}
