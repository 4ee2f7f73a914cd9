// sarama.go: the scenario's client interface on github.com/IBM/sarama (SyncProducer, ConsumerGroup,
// ClusterAdmin). Config.Version is set to Kafka 4.1 (sarama picks request versions from it, it does not
// negotiate them); produce runs with Producer.Idempotent (InitProducerId, MaxOpenRequests 1).
// Sarama has no auto.offset.reset=none: step 6c is ConsumePartition at an offset past the end, which sarama
// answers with ErrOffsetOutOfRange; 6d is a group whose committed offset is past the end with
// Offsets.Initial=OffsetOldest (ResetInvalidOffsets).
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type saramaClient struct {
	seed   string
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_1_0_0
	cfg.ClientID = "gregor-matrix-sarama"
	cfg.Metadata.AllowAutoTopicCreation = true // the broker has auto-creation off: 6a checks it refuses anyway
	return cfg
}

func newSarama(seed string) (client, error) {
	cl, err := sarama.NewClient(strings.Split(seed, ","), saramaConfig())
	if err != nil {
		return nil, err
	}
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &saramaClient{seed: seed, client: cl, admin: adm}, nil
}

func (s *saramaClient) name() string       { return "sarama" }
func (s *saramaClient) modulePath() string { return "github.com/IBM/sarama" }
func (s *saramaClient) codecs() []string   { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }
func (s *saramaClient) idempotence() string {
	return "Producer.Idempotent=true (sarama fails the produce if the broker cannot give a producer id)"
}
func (s *saramaClient) close() { s.admin.Close() }

func (s *saramaClient) createTopic(ctx context.Context, topic string, partitions int, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		v := v
		cfg[k] = &v
	}
	return s.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: 1,
		ConfigEntries: cfg}, false)
}

func (s *saramaClient) producer(codec string) (sarama.SyncProducer, error) {
	cfg := saramaConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Messages = 200
	switch codec {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	default:
		return nil, fmt.Errorf("unknown codec %s", codec)
	}
	return sarama.NewSyncProducer(strings.Split(s.seed, ","), cfg)
}

func (s *saramaClient) produce(ctx context.Context, topic, codec string, recs []rec) error {
	p, err := s.producer(codec)
	if err != nil {
		return err
	}
	defer p.Close()
	const batch = 500
	for i := 0; i < len(recs); i += batch {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		end := min(i+batch, len(recs))
		msgs := make([]*sarama.ProducerMessage, 0, end-i)
		for _, r := range recs[i:end] {
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.key), Value: sarama.ByteEncoder(r.value)}
			for _, h := range r.headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: []byte(h.value)})
			}
			msgs = append(msgs, m)
		}
		if err := p.SendMessages(msgs); err != nil {
			var pe sarama.ProducerErrors
			if errors.As(err, &pe) && len(pe) > 0 {
				return fmt.Errorf("records %d..%d: %d failed, first: %w", i, end-1, len(pe), pe[0].Err)
			}
			return fmt.Errorf("records %d..%d: %w", i, end-1, err)
		}
	}
	return nil
}

func (s *saramaClient) produceOne(ctx context.Context, topic string, key, value []byte) error {
	p, err := s.producer("none")
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)})
	return err
}

type saramaMember struct {
	id   string
	out  chan<- consumed
	gate <-chan struct{}
	cg   sarama.ConsumerGroup
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	sess sarama.ConsumerGroupSession
}

func (m *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.sess = sess
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	select { // nothing is delivered (or marked) before the scenario opens the gate
	case <-m.gate:
	case <-sess.Context().Done():
		return nil
	}
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			hs := make([]header, 0, len(msg.Headers))
			for _, h := range msg.Headers {
				hs = append(hs, header{string(h.Key), string(h.Value)})
			}
			pr, _ := parseRec(msg.Key, msg.Value, hs, "sarama")
			sess.MarkMessage(msg, "") // before handing it on, so a commit after the collector saw it includes it
			m.out <- consumed{member: m.id, partition: msg.Partition, offset: msg.Offset, rec: pr}
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (s *saramaClient) groupConfig(initial int64) *sarama.Config {
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = initial
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	return cfg
}

func (s *saramaClient) newMember(id, group, topic string, out chan<- consumed, gate <-chan struct{}) (member, error) {
	cg, err := sarama.NewConsumerGroup(strings.Split(s.seed, ","), group, s.groupConfig(sarama.OffsetOldest))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{id: id, out: out, gate: gate, cg: cg, stop: cancel, done: make(chan struct{})}
	go func() {
		for err := range cg.Errors() {
			fmt.Printf("    %s group error: %v\n", id, err)
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
				fmt.Printf("    %s consume: %v\n", id, err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return m, nil
}

func (m *saramaMember) commit(ctx context.Context) error {
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if sess == nil {
		return errors.New("member has no group session")
	}
	sess.Commit() // synchronous; errors go to cg.Errors(), the admin check after it sees the result
	return nil
}

func (m *saramaMember) close() {
	m.stop()
	<-m.done
	m.cg.Close()
}

func (s *saramaClient) partitions(topic string) ([]int32, error) {
	if err := s.client.RefreshMetadata(topic); err != nil {
		return nil, err
	}
	return s.client.Partitions(topic)
}

func (s *saramaClient) describeGroup(ctx context.Context, group, topic string) (groupInfo, error) {
	ds, err := s.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return groupInfo{}, err
	}
	if len(ds) != 1 {
		return groupInfo{}, fmt.Errorf("describe answered %d groups", len(ds))
	}
	if ds[0].Err != sarama.ErrNoError {
		return groupInfo{}, ds[0].Err
	}
	gi := groupInfo{state: ds[0].State, members: len(ds[0].Members), commits: map[int32]int64{}}
	parts, err := s.partitions(topic)
	if err != nil {
		return gi, err
	}
	offs, err := s.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return gi, err
	}
	for _, p := range parts {
		b := offs.GetBlock(topic, p)
		if b == nil {
			return gi, fmt.Errorf("no committed offset block for partition %d", p)
		}
		if b.Err != sarama.ErrNoError {
			return gi, fmt.Errorf("committed offset of partition %d: %w", p, b.Err)
		}
		end, err := s.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return gi, fmt.Errorf("end offset of partition %d: %w", p, err)
		}
		if b.Offset >= 0 {
			gi.commits[p] = b.Offset
			gi.lag += end - b.Offset
		} else {
			gi.lag += end
		}
	}
	return gi, nil
}

func (s *saramaClient) listOffsets(ctx context.Context, topic string, which int64) (map[int32]int64, error) {
	parts, err := s.partitions(topic)
	if err != nil {
		return nil, err
	}
	res := map[int32]int64{}
	for _, p := range parts {
		o, err := s.client.GetOffset(topic, p, which)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		res[p] = o
	}
	return res, nil
}

func (s *saramaClient) outOfRangeNone(ctx context.Context, topic string, offset int64) error {
	c, err := sarama.NewConsumer(strings.Split(s.seed, ","), s.groupConfig(sarama.OffsetOldest))
	if err != nil {
		return err
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, offset)
	if err != nil {
		return fmt.Errorf("ConsumePartition at %d (sarama checks the offset with ListOffsets before it fetches): %w", offset, err)
	}
	pc.Close()
	return nil
}

func (s *saramaClient) outOfRangeEarliest(ctx context.Context, topic string, offset int64) (int64, error) {
	group := fmt.Sprintf("matrix-sarama-oor-%d", time.Now().UnixNano()%1_000_000_000)
	om, err := sarama.NewOffsetManagerFromClient(group, s.client)
	if err != nil {
		return -1, err
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		om.Close()
		return -1, err
	}
	pom.MarkOffset(offset, "")
	om.Commit()
	pom.Close()
	om.Close()
	offs, err := s.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		return -1, fmt.Errorf("read back the committed offset: %w", err)
	}
	if b := offs.GetBlock(topic, 0); b == nil || b.Offset != offset {
		return -1, fmt.Errorf("committing offset %d for group %s did not take: %+v", offset, group, b)
	}
	out := make(chan consumed, 1<<16)
	cg, err := sarama.NewConsumerGroup(strings.Split(s.seed, ","), group, s.groupConfig(sarama.OffsetOldest))
	if err != nil {
		return -1, err
	}
	go func() {
		for range cg.Errors() {
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	open := make(chan struct{})
	close(open)
	m := &saramaMember{id: "oor", out: out, gate: open, cg: cg, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, m); err != nil && cctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	defer m.close()
	for {
		select {
		case c := <-out:
			if c.partition == 0 {
				return c.offset, nil
			}
		case <-ctx.Done():
			return -1, errors.New("no record from partition 0 after the reset")
		}
	}
}

func (s *saramaClient) readBack(ctx context.Context, topic string, n int) ([]consumed, error) {
	c, err := sarama.NewConsumer(strings.Split(s.seed, ","), s.groupConfig(sarama.OffsetOldest))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var got []consumed
	for len(got) < n {
		select {
		case msg := <-pc.Messages():
			hs := make([]header, 0, len(msg.Headers))
			for _, h := range msg.Headers {
				hs = append(hs, header{string(h.Key), string(h.Value)})
			}
			pr, _ := parseRec(msg.Key, msg.Value, hs, "sarama")
			got = append(got, consumed{member: "reader", partition: msg.Partition, offset: msg.Offset, rec: pr})
		case err := <-pc.Errors():
			return got, err
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d records read back", len(got), n)
		}
	}
	return got, nil
}
