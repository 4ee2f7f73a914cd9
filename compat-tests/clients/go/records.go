// records.go: the records the scenario produces and the check of what a group consumed.
// A record's key is "k0".."k49" (round robin), its value "v-<key>-<seq>-" padded with 'x' to 100 bytes where seq
// counts the key's records from 0, and it carries headers "h-seq" (the same number) and "h-src" (the client). The check proves:
// every expected (key, seq) arrived, nothing unexpected did, a (key, seq) sits at one offset only (no duplicate
// in the log), content and headers match, every key lives on one partition, and along that partition's offsets
// the key's seq only grows (per-key order). Deliveries of one offset more than once are a failure (the
// scenario opens the members' gates only once the group is Stable, so no rebalance should re-deliver).
package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

const numKeys = 50

type header struct{ key, value string }

type rec struct {
	key     string
	seq     int
	value   []byte
	headers []header
}

// recValue is "v-<key>-<seq>-" padded with 'x' to 100 bytes (the matrix README's record shape).
func recValue(key string, seq int) string {
	v := fmt.Sprintf("v-%s-%d-", key, seq)
	if len(v) < 100 {
		v += strings.Repeat("x", 100-len(v))
	}
	return v
}

func newRec(key string, seq int, client string) rec {
	return rec{key: key, seq: seq, value: []byte(recValue(key, seq)),
		headers: []header{{"h-seq", strconv.Itoa(seq)}, {"h-src", client}}}
}

// parseRec rebuilds a rec from what a client delivered and says what is wrong with it, if anything.
func parseRec(key []byte, value []byte, headers []header, client string) (rec, error) {
	r := rec{key: string(key), value: value, headers: headers, seq: -1}
	rest, ok := strings.CutPrefix(string(value), "v-"+r.key+"-")
	if !ok {
		return r, fmt.Errorf("key %q: value %.80q is not what was produced", key, value)
	}
	num, _, _ := strings.Cut(rest, "-")
	seq, err := strconv.Atoi(num)
	if err != nil || string(value) != recValue(r.key, seq) {
		return r, fmt.Errorf("key %q: value %.80q is not what was produced", key, value)
	}
	r.seq = seq
	var hseq, hsrc string
	for _, h := range headers {
		switch h.key {
		case "h-seq":
			hseq = h.value
		case "h-src":
			hsrc = h.value
		}
	}
	if len(headers) != 2 || hseq != num || hsrc != client {
		return r, fmt.Errorf("key %q seq %d: headers %v, want [h-seq=%d h-src=%s]", key, seq, headers, seq, client)
	}
	return r, nil
}

// checkConsumed checks got against exp (key -> [first seq, end seq)). It returns a detail line and the first
// problem found.
func checkConsumed(got []consumed, exp map[string][2]int, client string) (string, error) {
	want := 0
	for _, r := range exp {
		want += r[1] - r[0]
	}
	type pos struct {
		p int32
		o int64
	}
	atOffset := map[pos]consumed{}
	redelivered := 0
	for _, c := range got {
		if c.rec.seq < 0 {
			return "", fmt.Errorf("partition %d offset %d: unparsable record (key %q)", c.partition, c.offset, c.rec.key)
		}
		if _, err := parseRec([]byte(c.rec.key), c.rec.value, c.rec.headers, client); err != nil {
			return "", fmt.Errorf("partition %d offset %d: %v", c.partition, c.offset, err)
		}
		k := pos{c.partition, c.offset}
		if prev, ok := atOffset[k]; ok {
			if prev.rec.key != c.rec.key || prev.rec.seq != c.rec.seq {
				return "", fmt.Errorf("partition %d offset %d delivered twice with different records", c.partition, c.offset)
			}
			redelivered++
			continue
		}
		atOffset[k] = c
	}
	// distinct (key, seq) and where they sit
	where := map[string]pos{}
	keyPart := map[string]int32{}
	for k, c := range atOffset {
		r, ok := exp[c.rec.key]
		if !ok || c.rec.seq < r[0] || c.rec.seq >= r[1] {
			return "", fmt.Errorf("unexpected record key %s seq %d at partition %d offset %d", c.rec.key, c.rec.seq, k.p, k.o)
		}
		id := c.rec.key + "/" + strconv.Itoa(c.rec.seq)
		if other, dup := where[id]; dup {
			return "", fmt.Errorf("key %s seq %d is in the log twice: partition %d offset %d and partition %d offset %d",
				c.rec.key, c.rec.seq, other.p, other.o, k.p, k.o)
		}
		where[id] = k
		if p, ok := keyPart[c.rec.key]; ok && p != k.p {
			return "", fmt.Errorf("key %s is on partitions %d and %d", c.rec.key, p, k.p)
		}
		keyPart[c.rec.key] = k.p
	}
	if len(where) != want {
		missing := []string{}
		for key, r := range exp {
			for s := r[0]; s < r[1]; s++ {
				if _, ok := where[key+"/"+strconv.Itoa(s)]; !ok && len(missing) < 5 {
					missing = append(missing, key+"/"+strconv.Itoa(s))
				}
			}
		}
		sort.Strings(missing)
		return "", fmt.Errorf("%d of %d records consumed (%d deliveries); missing e.g. %v", len(where), want, len(got), missing)
	}
	// per-key order along the offsets
	byKey := map[string][]consumed{}
	for _, c := range atOffset {
		byKey[c.rec.key] = append(byKey[c.rec.key], c)
	}
	for key, cs := range byKey {
		sort.Slice(cs, func(i, j int) bool { return cs[i].offset < cs[j].offset })
		for i := 1; i < len(cs); i++ {
			if cs[i].rec.seq != cs[i-1].rec.seq+1 {
				return "", fmt.Errorf("key %s out of order: seq %d at offset %d follows seq %d at offset %d",
					key, cs[i].rec.seq, cs[i].offset, cs[i-1].rec.seq, cs[i-1].offset)
			}
		}
	}
	detail := fmt.Sprintf("%d records, %d keys in order, content and headers ok", want, len(byKey))
	if redelivered > 0 {
		return detail, fmt.Errorf("%d records were delivered more than once", redelivered)
	}
	return detail, nil
}
