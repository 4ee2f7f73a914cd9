// sasl.go: `gomatrix -client franz-sasl`: franz-go over SASL_PLAINTEXT, SASL_SSL or SSL (issue #23), used by
// compat-tests/sasl/clients.sh: produces N records with acks=all to a new topic, reads them back from the
// start, and exits 0 when they match in order (1 with the error otherwise). Flags: -bootstrap, -protocol
// (SASL_PLAINTEXT, SASL_SSL, SSL), -mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER: an unsecured
// token for -user, no password), -user, -password, -ca
// (a PEM file the broker's certificate chains to), -topic, -n.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type saslFlags struct {
	bootstrap, protocol, mechanism, user, password, ca, topic string
	n                                                         int
}

func saslMechanism(f saslFlags) (sasl.Mechanism, error) {
	switch f.mechanism {
	case "PLAIN":
		return plain.Auth{User: f.user, Pass: f.password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: f.user, Pass: f.password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: f.user, Pass: f.password}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		return oauth.Auth{Token: unsecuredToken(f.user)}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("unknown mechanism %q", f.mechanism)
}

// unsecuredToken is an unsecured JWS (RFC 7515 with alg "none", an empty signature) for principal `sub`,
// valid for an hour: what Kafka's unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler) accepts.
func unsecuredToken(sub string) string {
	enc := base64.RawURLEncoding
	now := time.Now().Unix()
	payload := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+3600)
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(payload)) + "."
}

func saslOpts(f saslFlags) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(f.bootstrap, ",")...)}
	if strings.HasSuffix(f.protocol, "SSL") {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no certificate in " + f.ca)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if strings.HasPrefix(f.protocol, "SASL") {
		m, err := saslMechanism(f)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func runSASL(f saslFlags) error {
	opts, err := saslOpts(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := kgo.NewClient(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return err
	}
	defer p.Close()
	// a refused login shows here as the broker's error (franz-go would otherwise retry until the deadline)
	pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
	defer pcancel()
	if err := p.Ping(pctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	for i := 0; i < f.n; i++ {
		p.Produce(ctx, &kgo.Record{Topic: f.topic, Value: []byte(fmt.Sprintf("fz-%05d", i))}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	c, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(f.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer c.Close()
	got := 0
	for got < f.n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of %d: %w", got, f.n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, e error) { ferr = e })
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if want := fmt.Sprintf("fz-%05d", got); string(r.Value) != want {
				return fmt.Errorf("record %d is %q, want %q", got, r.Value, want)
			}
			got++
		}
	}
	return nil
}
