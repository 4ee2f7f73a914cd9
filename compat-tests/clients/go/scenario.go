// scenario.go: the client-matrix scenario of issue #9 for the Go clients (franz-go, sarama), run against one
// broker and written as result.json (the interface of compat-tests/clients: steps 1..6d, each ok true/false/null).
// A client is an implementation of `client` (franz.go, sarama.go); this file owns the records, the checks and
// the step order, so both Go clients are held to exactly the same rules. Records carry their key, a per-key
// sequence number and headers, so count, per-key order, content and headers can be checked after consuming.
// Read next: records.go (record shape and the consumed-records check), then franz.go / sarama.go.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// notApplicable marks a step the client cannot do; reported as "ok": null with the reason.
type notApplicable struct{ reason string }

func (n notApplicable) Error() string { return n.reason }

// consumed is one record as a group member delivered it.
type consumed struct {
	member    string
	partition int32
	offset    int64
	rec       rec
}

// member is one consumer-group member running in the background and delivering into a shared channel.
type member interface {
	// commit commits every record this member has delivered so far (synchronous).
	commit(ctx context.Context) error
	// close leaves the group.
	close()
}

// groupInfo is what the admin API says about a group.
type groupInfo struct {
	state   string
	members int
	lag     int64           // total lag over the topic's partitions
	commits map[int32]int64 // committed offset per partition
}

type client interface {
	name() string
	modulePath() string
	codecs() []string    // compression codecs the client can produce, "none" first
	idempotence() string // what the last produce ran with: idempotence on (producer id) or why not
	createTopic(ctx context.Context, topic string, partitions int, configs map[string]string) error
	// produce sends recs in batches with the codec, acks=all; returns when all are acknowledged.
	produce(ctx context.Context, topic, codec string, recs []rec) error
	// produceOne sends one record (key, value) and returns the broker's or client's error.
	produceOne(ctx context.Context, topic string, key, value []byte) error
	// newMember joins the group in the background; it delivers nothing before gate is closed.
	newMember(id, group, topic string, out chan<- consumed, gate <-chan struct{}) (member, error)
	// readBack reads partition 0 of topic from the start until n records arrived (no group).
	readBack(ctx context.Context, topic string, n int) ([]consumed, error)
	describeGroup(ctx context.Context, group, topic string) (groupInfo, error)
	// listOffsets: which is -2 earliest, -1 latest, or a timestamp in ms.
	listOffsets(ctx context.Context, topic string, which int64) (map[int32]int64, error)
	// outOfRangeNone fetches partition 0 at an offset past its end with no reset policy and returns the
	// client's error (nil means the client did not report one).
	outOfRangeNone(ctx context.Context, topic string, offset int64) error
	// outOfRangeEarliest starts at an offset past the end with reset to earliest and returns the first
	// offset delivered from partition 0.
	outOfRangeEarliest(ctx context.Context, topic string, offset int64) (int64, error)
	close()
}

type stepResult struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	OK     *bool   `json:"ok"`
	Error  *string `json:"error"`
	Detail string  `json:"detail"`
	Secs   float64 `json:"seconds"`
}

type result struct {
	Client   string `json:"client"`
	Version  string `json:"version"`
	Language string `json:"language"`
	// InstallError is null here: run-client.sh writes the install failures itself
	InstallError *string      `json:"install_error"`
	Steps        []stepResult `json:"steps"`
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return "unknown"
}

func main() {
	which := flag.String("client", "", "franz-go or sarama")
	bootstrap := flag.String("bootstrap", "", "host:port")
	mode := flag.String("mode", "quick", "quick or full")
	out := flag.String("out", "result.json", "result file")
	// MATRIX_PARTITIONS / MATRIX_MEMBERS (make test-cluster: 12 and 3, a topic led by three brokers and a
	// group spanning them); the matrix's own scenario is 6 partitions and a group of 2.
	parts := envInt("MATRIX_PARTITIONS", 6, 1, 1000)
	nmembers := envInt("MATRIX_MEMBERS", 2, 2, 16)
	var sf saslFlags
	flag.StringVar(&sf.protocol, "protocol", "SASL_SSL", "franz-sasl: SASL_PLAINTEXT, SASL_SSL or SSL")
	flag.StringVar(&sf.mechanism, "mechanism", "PLAIN", "franz-sasl: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (an unsecured token for -user)")
	flag.StringVar(&sf.user, "user", "", "franz-sasl: user name")
	flag.StringVar(&sf.password, "password", "", "franz-sasl: password")
	flag.StringVar(&sf.ca, "ca", "", "franz-sasl: CA certificate (PEM)")
	flag.StringVar(&sf.topic, "topic", "franz-sasl", "franz-sasl: topic")
	flag.IntVar(&sf.n, "n", 200, "franz-sasl: records")
	flag.Parse()
	if *which == "franz-sasl" {
		sf.bootstrap = *bootstrap
		if err := runSASL(sf); err != nil {
			fmt.Fprintln(os.Stderr, "franz-sasl:", err)
			os.Exit(1)
		}
		fmt.Println("franz-sasl: ok")
		return
	}
	var c client
	var err error
	switch *which {
	case "franz-go":
		c, err = newFranz(*bootstrap)
	case "sarama":
		c, err = newSarama(*bootstrap)
	default:
		fmt.Fprintln(os.Stderr, "unknown -client", *which)
		os.Exit(2)
	}
	res := result{Client: *which, Language: "Go " + strings.TrimPrefix(runtime.Version(), "go"), Version: "unknown"}
	if err != nil {
		res.Steps = append(res.Steps, fail("1", "create-topic", err, "client did not start"))
		writeResult(*out, res)
		os.Exit(1)
	}
	res.Version = moduleVersion(c.modulePath())
	sc := &scenario{c: c, mode: *mode, res: &res, parts: parts, nmembers: nmembers}
	sc.run()
	c.close()
	writeResult(*out, res)
	failed := 0
	for _, s := range res.Steps {
		if s.OK != nil && !*s.OK {
			failed++
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// envInt reads a whole number from the environment variable name, def when unset, bounded to lo..hi.
func envInt(name string, def, lo, hi int) int {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return def
	}
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func writeResult(path string, res result) {
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write result:", err)
		os.Exit(2)
	}
}

func fail(id, name string, err error, detail string) stepResult {
	f := false
	s := err.Error()
	return stepResult{ID: id, Name: name, OK: &f, Error: &s, Detail: detail}
}

type scenario struct {
	c        client
	mode     string
	parts    int // partitions of the topic (6)
	nmembers int // members of the group in step 3 (2)
	res      *result
	topic    string
	group    string
	// produced per key: sequence numbers 0..next-1 are in the topic
	next  map[string]int
	total int
	// stepOK remembers which steps passed, so a later step that needs an earlier one says why it is skipped.
	stepOK map[string]bool
	// state across steps 3..5
	out      chan consumed
	members  []member
	tsBefore int64           // ms timestamp taken before step 4's records
	endsAt3  map[int32]int64 // end offsets after step 3's records
}

func (s *scenario) n() int {
	if s.mode == "full" {
		return 10000
	}
	return 300
}

func (s *scenario) more() int {
	if s.mode == "full" {
		return 1000
	}
	return 100
}

func (s *scenario) timeout() time.Duration {
	if s.mode == "full" {
		return 180 * time.Second
	}
	return 40 * time.Second
}

// step runs fn with a deadline, turns a panic into a failure and appends the result.
func (s *scenario) step(id, name string, fn func(ctx context.Context) (string, error)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
	defer cancel()
	start := time.Now()
	var detail string
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		detail, err = fn(ctx)
	}()
	r := stepResult{ID: id, Name: name, Detail: detail, Secs: time.Since(start).Seconds()}
	var na notApplicable
	switch {
	case errors.As(err, &na):
		e := na.reason
		r.Error = &e
	case err != nil:
		f := false
		e := err.Error()
		if ctx.Err() != nil && !strings.Contains(e, "deadline") {
			e += " (step deadline " + s.timeout().String() + " passed)"
		}
		r.OK, r.Error = &f, &e
	default:
		t := true
		r.OK = &t
	}
	s.res.Steps = append(s.res.Steps, r)
	status := "ok"
	if r.OK == nil {
		status = "n/a"
	} else if !*r.OK {
		status = "FAIL"
	}
	msg := detail
	if r.Error != nil {
		msg = *r.Error + " | " + detail
	}
	fmt.Printf("  %-4s %s %s (%.1fs): %s\n", status, id, name, r.Secs, msg)
	if s.stepOK == nil {
		s.stepOK = map[string]bool{}
	}
	s.stepOK[id] = r.OK != nil && *r.OK
	return s.stepOK[id]
}

// codec is step 2's codec: CODEC in quick mode (default lz4), lz4 in full mode.
func (s *scenario) codec() string {
	codec := os.Getenv("CODEC")
	if codec == "" || s.mode == "full" {
		codec = "lz4"
	}
	return codec
}

// codecRoundTrip is full mode's 2-<codec>: 1,000 records with the codec to a 1-partition topic of their own,
// read back and checked.
func (s *scenario) codecRoundTrip(ctx context.Context, codec string) (string, error) {
	topic := s.topic + "-" + codec
	if err := s.c.createTopic(ctx, topic, 1, nil); err != nil {
		return "", fmt.Errorf("create %s: %w", topic, err)
	}
	recs := make([]rec, 0, 1000)
	for i := 0; i < 1000; i++ {
		recs = append(recs, newRec(fmt.Sprintf("k%d", i%numKeys), i/numKeys, s.c.name()))
	}
	if err := s.c.produce(ctx, topic, codec, recs); err != nil {
		return "", err
	}
	got, err := s.c.readBack(ctx, topic, len(recs))
	if err != nil {
		return "", fmt.Errorf("read back: %w", err)
	}
	exp := map[string][2]int{}
	for k := 0; k < numKeys; k++ {
		exp[fmt.Sprintf("k%d", k)] = [2]int{0, 1000 / numKeys}
	}
	detail, err := checkConsumed(got, exp, s.c.name())
	if err != nil {
		return detail, err
	}
	return fmt.Sprintf("1000 records with %s to %s, read back: %s", codec, topic, detail), nil
}

func (s *scenario) run() {
	stamp := time.Now().UnixNano() % 1_000_000_000
	s.topic = fmt.Sprintf("matrix-%s-%d", s.c.name(), stamp)
	s.group = fmt.Sprintf("matrix-%s-group-%d", s.c.name(), stamp)
	s.next = map[string]int{}

	s.step("1", "create-topic", func(ctx context.Context) (string, error) {
		if err := s.c.createTopic(ctx, s.topic, s.parts, nil); err != nil {
			return "", err
		}
		if err := s.c.createTopic(ctx, s.topic+"-6b", 1, map[string]string{"max.message.bytes": "65536"}); err != nil {
			return "", fmt.Errorf("create the 6b topic with max.message.bytes=65536: %w", err)
		}
		ends, err := s.c.listOffsets(ctx, s.topic, -1)
		if err != nil {
			return "", fmt.Errorf("topic created, list offsets: %w", err)
		}
		if len(ends) != s.parts {
			return "", fmt.Errorf("topic has %d partitions, want %d", len(ends), s.parts)
		}
		return fmt.Sprintf("%d partitions, replication factor 1, via the admin API", s.parts), nil
	})

	s.step("2", "produce", func(ctx context.Context) (string, error) {
		if !s.stepOK["1"] {
			return "", errors.New("skipped: step 1 failed")
		}
		codec := s.codec()
		recs := s.makeRecords(s.n())
		if err := s.c.produce(ctx, s.topic, codec, recs); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d records, %d keys, codec %s, acks=all, %s", len(recs), numKeys, codec,
			s.c.idempotence()), nil
	})
	if s.mode == "full" {
		supported := map[string]bool{}
		for _, c := range s.c.codecs() {
			supported[c] = true
		}
		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			codec := codec
			s.step("2-"+codec, "produce-"+codec, func(ctx context.Context) (string, error) {
				if !supported[codec] {
					return "", notApplicable{fmt.Sprintf("%s cannot produce %s", s.c.name(), codec)}
				}
				return s.codecRoundTrip(ctx, codec)
			})
		}
	}

	s.step("3", "group-consume", s.groupConsume)
	s.step("4", "restart-resume", s.restartResume)
	s.step("5", "describe-lag-list-offsets", s.describeLag)
	for _, m := range s.members {
		m.close()
	}
	s.members = nil

	s.step("6a", "produce-missing-topic-noautocreate", func(ctx context.Context) (string, error) {
		missing := s.topic + "-missing"
		err := s.c.produceOne(ctx, missing, []byte("k"), []byte("v"))
		if err == nil {
			return "", fmt.Errorf("produce to missing topic %s succeeded (auto-creation is off)", missing)
		}
		ends, lerr := s.c.listOffsets(ctx, missing, -1)
		if lerr == nil && len(ends) > 0 {
			return "", fmt.Errorf("the topic exists after the produce: %v", ends)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "unknown_topic") &&
			!strings.Contains(strings.ToLower(err.Error()), "unknown topic") &&
			!strings.Contains(strings.ToLower(err.Error()), "does not host this topic") &&
			!strings.Contains(strings.ToLower(err.Error()), "does not exist") {
			return "", fmt.Errorf("produce failed, but not with UNKNOWN_TOPIC_OR_PARTITION: %v", err)
		}
		return "client error: " + err.Error(), nil
	})

	s.step("6b", "record-too-large", func(ctx context.Context) (string, error) {
		small := s.topic + "-6b"
		if !s.stepOK["1"] {
			return "", errors.New("skipped: step 1 failed")
		}
		big := make([]byte, 100*1024)
		for i := range big { // incompressible, so a codec cannot bring it under the limit
			big[i] = byte(uint32(i*2654435761) >> 24)
		}
		err := s.c.produceOne(ctx, small, []byte("big"), big)
		if err == nil {
			return "", errors.New("a 100 KB record was accepted by a topic with max.message.bytes=65536")
		}
		l := strings.ToLower(err.Error())
		if !strings.Contains(l, "too large") && !strings.Contains(l, "too_large") && !strings.Contains(l, "larger than") {
			return "", fmt.Errorf("produce failed, but not with MESSAGE_TOO_LARGE: %v", err)
		}
		if err := s.c.produceOne(ctx, small, []byte("ok"), big[:1000]); err != nil {
			return "", fmt.Errorf("a 1000-byte record after the rejected one failed: %w", err)
		}
		return "client error: " + err.Error(), nil
	})

	s.step("6c", "out-of-range-none", func(ctx context.Context) (string, error) {
		err := s.c.outOfRangeNone(ctx, s.topic, 1_000_000)
		var na notApplicable
		if errors.As(err, &na) {
			return "", err
		}
		if err == nil {
			return "", errors.New("no error for offset 1000000 past the end with no reset policy")
		}
		l := strings.ToLower(err.Error())
		if !strings.Contains(l, "out of range") && !strings.Contains(l, "out_of_range") && !strings.Contains(l, "outside the range") {
			return "", fmt.Errorf("error, but not OFFSET_OUT_OF_RANGE: %v", err)
		}
		return "client error: " + err.Error(), nil
	})

	s.step("6d", "out-of-range-earliest", func(ctx context.Context) (string, error) {
		if s.total == 0 {
			return "", errors.New("skipped: step 2 produced nothing to reset to")
		}
		off, err := s.c.outOfRangeEarliest(ctx, s.topic, 1_000_000)
		if err != nil {
			return "", err
		}
		if off != 0 {
			return "", fmt.Errorf("after the reset to earliest the first record had offset %d, want 0", off)
		}
		return "offset 1000000 reset to earliest, first record at offset 0", nil
	})

	if os.Getenv("TXN") == "1" {
		s.step("7", "transactions", s.transactions)
	}
}

func (s *scenario) makeRecords(n int) []rec {
	recs := make([]rec, 0, n)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", s.total%numKeys)
		s.total++
		seq := s.next[key]
		s.next[key] = seq + 1
		recs = append(recs, newRec(key, seq, s.c.name()))
	}
	return recs
}

func (s *scenario) expected(fromNext map[string]int) map[string][2]int {
	exp := map[string][2]int{}
	for k, n := range s.next {
		if fromNext[k] < n {
			exp[k] = [2]int{fromNext[k], n}
		}
	}
	return exp
}

// collect reads from s.out until every expected (key, seq) was seen, or ctx ends; then waits a little
// for stray duplicates.
func (s *scenario) collect(ctx context.Context, exp map[string][2]int) []consumed {
	want := 0
	for _, r := range exp {
		want += r[1] - r[0]
	}
	seen := map[string]bool{}
	var got []consumed
	settle := time.NewTimer(time.Hour)
	defer settle.Stop()
	for {
		select {
		case c := <-s.out:
			got = append(got, c)
			id := c.rec.key + "/" + fmt.Sprint(c.rec.seq)
			if r, ok := exp[c.rec.key]; ok && c.rec.seq >= r[0] && c.rec.seq < r[1] && !seen[id] {
				seen[id] = true
				if len(seen) == want {
					settle.Reset(500 * time.Millisecond)
				}
			}
		case <-settle.C:
			return got
		case <-ctx.Done():
			return got
		}
	}
}

func (s *scenario) startMember(id string, gate <-chan struct{}) error {
	m, err := s.c.newMember(id, s.group, s.topic, s.out, gate)
	if err != nil {
		return fmt.Errorf("member %s: %w", id, err)
	}
	s.members = append(s.members, m)
	return nil
}

func (s *scenario) commitAll(ctx context.Context) error {
	for i, m := range s.members {
		if err := m.commit(ctx); err != nil {
			return fmt.Errorf("commit of member %d: %w", i+1, err)
		}
	}
	return nil
}

// waitCommitted polls the admin API until the group's committed offsets equal the end offsets of every
// partition that holds records (the keys may leave a partition empty: nothing to consume or commit there).
func (s *scenario) waitCommitted(ctx context.Context) (groupInfo, error) {
	var gi groupInfo
	var err error
	for {
		gi, err = s.c.describeGroup(ctx, s.group, s.topic)
		if err == nil && gi.lag == 0 {
			var ends map[int32]int64
			if ends, err = s.c.listOffsets(ctx, s.topic, -1); err == nil && len(ends) == s.parts {
				missing := 0
				for p, end := range ends {
					if c, ok := gi.commits[p]; end > 0 && (!ok || c != end) {
						missing++
					}
				}
				if missing == 0 {
					return gi, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return gi, err
			}
			return gi, fmt.Errorf("committed offsets %v, lag %d after commit, want the end offset of every non-empty one of %d partitions", gi.commits, gi.lag, s.parts)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *scenario) groupConsume(ctx context.Context) (string, error) {
	if !s.stepOK["1"] || len(s.next) == 0 {
		return "", errors.New("skipped: nothing was produced")
	}
	s.out = make(chan consumed, 1<<16)
	gate := make(chan struct{})
	for i := 1; i <= s.nmembers; i++ {
		id := fmt.Sprintf("m%d", i)
		if err := s.startMember(id, gate); err != nil {
			return "", err
		}
	}
	if _, err := s.waitStable(ctx); err != nil {
		return "", err
	}
	close(gate)
	exp := s.expected(map[string]int{})
	got := s.collect(ctx, exp)
	detail, err := checkConsumed(got, exp, s.c.name())
	if err != nil {
		return detail, err
	}
	members := map[string]int{}
	for _, c := range got {
		members[c.member]++
	}
	if len(members) < s.nmembers {
		return detail, fmt.Errorf("only %d member(s) delivered records: %v", len(members), members)
	}
	if err := s.commitAll(ctx); err != nil {
		return detail, err
	}
	if _, err := s.waitCommitted(ctx); err != nil {
		return detail, err
	}
	ends, err := s.c.listOffsets(ctx, s.topic, -1)
	if err != nil {
		return detail, fmt.Errorf("list end offsets: %w", err)
	}
	s.endsAt3 = ends
	return fmt.Sprintf("%s; per member %v; committed = end offsets", detail, members), nil
}

func (s *scenario) restartResume(ctx context.Context) (string, error) {
	if !s.stepOK["3"] {
		return "", errors.New("skipped: step 3 failed")
	}
	s.members[0].close()
	s.members = s.members[1:]
	before := map[string]int{}
	for k, v := range s.next {
		before[k] = v
	}
	gate := make(chan struct{})
	if err := s.startMember("m1b", gate); err != nil {
		return "", err
	}
	if _, err := s.waitStable(ctx); err != nil {
		return "", fmt.Errorf("after the restart: %w", err)
	}
	close(gate)
	time.Sleep(20 * time.Millisecond)
	s.tsBefore = time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	recs := s.makeRecords(s.more())
	if err := s.c.produce(ctx, s.topic, s.codec(), recs); err != nil {
		return "", fmt.Errorf("produce %d more: %w", len(recs), err)
	}
	exp := s.expected(before)
	got := s.collect(ctx, exp)
	old := 0
	for _, c := range got {
		if c.rec.seq < before[c.rec.key] {
			old++
		}
	}
	detail, err := checkConsumed(got, exp, s.c.name())
	if old > 0 {
		return detail, fmt.Errorf("%d records from before the committed offsets were delivered again", old)
	}
	if err != nil {
		return detail, err
	}
	if err := s.commitAll(ctx); err != nil {
		return detail, err
	}
	if _, err := s.waitCommitted(ctx); err != nil {
		return detail, err
	}
	return fmt.Sprintf("member m1 closed, %d produced, m1 rejoined: %s", len(recs), detail), nil
}

// waitStable waits until the admin API describes the group as Stable with its members (s.nmembers).
func (s *scenario) waitStable(ctx context.Context) (groupInfo, error) {
	for {
		gi, err := s.c.describeGroup(ctx, s.group, s.topic)
		if err == nil && gi.members == s.nmembers && strings.EqualFold(gi.state, "Stable") {
			return gi, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("group state %s with %d members, want Stable with %d", gi.state, gi.members, s.nmembers)
			}
			return gi, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *scenario) describeLag(ctx context.Context) (string, error) {
	if !s.stepOK["4"] {
		return "", errors.New("skipped: step 4 failed")
	}
	gi, err := s.waitStable(ctx)
	if err != nil {
		return "", err
	}
	if gi.lag != 0 {
		return "", fmt.Errorf("lag %d after everything was committed", gi.lag)
	}
	earliest, err := s.c.listOffsets(ctx, s.topic, -2)
	if err != nil {
		return "", fmt.Errorf("list earliest: %w", err)
	}
	latest, err := s.c.listOffsets(ctx, s.topic, -1)
	if err != nil {
		return "", fmt.Errorf("list latest: %w", err)
	}
	byTime, err := s.c.listOffsets(ctx, s.topic, s.tsBefore)
	if err != nil {
		return "", fmt.Errorf("list by timestamp: %w", err)
	}
	total := 0
	for _, n := range s.next {
		total += n
	}
	var sumLatest int64
	for p := int32(0); p < int32(s.parts); p++ {
		if earliest[p] != 0 {
			return "", fmt.Errorf("earliest offset of partition %d is %d, want 0", p, earliest[p])
		}
		sumLatest += latest[p]
		if latest[p] != gi.commits[p] {
			return "", fmt.Errorf("partition %d: latest %d but committed %d", p, latest[p], gi.commits[p])
		}
		// the first record at or after the timestamp is the first of step 4; a partition that got none of
		// step 4's records answers -1 (Kafka) or its end offset (clients that map -1 to the end)
		want := s.endsAt3[p]
		got := byTime[p]
		if latest[p] == want {
			if got != -1 && got != want {
				return "", fmt.Errorf("partition %d: offset by timestamp %d, want -1 or end %d", p, got, want)
			}
		} else if got != want {
			return "", fmt.Errorf("partition %d: offset by timestamp %d, want %d (first record of step 4)", p, got, want)
		}
	}
	if sumLatest != int64(total) {
		return "", fmt.Errorf("latest offsets add up to %d, %d records were produced", sumLatest, total)
	}
	future, err := s.c.listOffsets(ctx, s.topic, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		return "", fmt.Errorf("list by a future timestamp: %w", err)
	}
	for p, o := range future {
		if o != -1 && o != latest[p] {
			return "", fmt.Errorf("partition %d: offset for a future timestamp %d, want -1 (or the end %d)", p, o, latest[p])
		}
	}
	return fmt.Sprintf("group %s, %d members, lag 0; earliest all 0, latest sum %d, by-timestamp = step-4 start offsets, future timestamp none",
		gi.state, gi.members, sumLatest), nil
}
