package scrub

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestSecretsRemovesOnlyRegisteredValues(t *testing.T) {
	src := Register("test")
	defer src.Close()
	src.Set("zz-provider-key-0123", "zz-provider-key-0123-longer")
	in := "key zz-provider-key-0123-longer and zz-provider-key-0123; sk-proj-AbCdEf0123456789xyz password=hunter22"
	got := Secrets(in)
	want := "key " + Redacted + " and " + Redacted + "; sk-proj-AbCdEf0123456789xyz password=hunter22"
	if got != want {
		t.Fatalf("Secrets = %q, want %q", got, want)
	}
	if clean := "no secret here, only text"; Secrets(clean) != clean {
		t.Fatal("a clean text changed")
	}
}

func TestSecretsJSONStaysValid(t *testing.T) {
	src := Register("test")
	defer src.Close()
	src.Set(`zz"quoted-secret`)
	raw, _ := json.Marshal(map[string]string{"q": `say zz"quoted-secret now`})
	out := SecretsJSON(raw)
	if !json.Valid(out) || strings.Contains(string(out), "quoted-secret") {
		t.Fatalf("SecretsJSON = %s", out)
	}
}

// streamAll feeds text to a Stream in the given piece sizes and returns
// what it emitted, piece by piece.
func streamAll(t *testing.T, text string, sizes func() int) []string {
	t.Helper()
	var out []string
	st := NewStream(func(s string) error { out = append(out, s); return nil })
	for len(text) > 0 {
		n := min(sizes(), len(text))
		if err := st.Write(text[:n]); err != nil {
			t.Fatal(err)
		}
		text = text[n:]
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A secret cut across stream pieces at any point never appears in what
// the stream emits, nor in any one emitted piece, and the stream's output
// is what Secrets makes of the whole text.
func TestStreamSplitSecrets(t *testing.T) {
	src := Register("test")
	defer src.Close()
	keys := []string{"sk-live-0123456789abcdefXYZ", "sk-live-0123456789", "héllo-sécret-ünicode"}
	src.Set(keys...)
	text := "Here it is: sk-live-0123456789abcdefXYZ, then sk-live-0123456789!, then héllo-sécret-ünicode. Ünïcödé tail ✓"
	want := Secrets(text)
	for _, k := range keys {
		if strings.Contains(want, k) {
			t.Fatalf("Secrets left %q", k)
		}
	}
	rng := rand.New(rand.NewSource(7))
	for size := 1; size <= len(text); size++ {
		for _, sizes := range []func() int{func() int { return size }, func() int { return 1 + rng.Intn(size) }} {
			pieces := streamAll(t, text, sizes)
			if got := strings.Join(pieces, ""); got != want {
				t.Fatalf("size %d: stream = %q, want %q", size, got, want)
			}
			for _, p := range pieces {
				if !isValidUTF8(p) {
					t.Fatalf("size %d: piece %q cuts a character", size, p)
				}
			}
		}
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// With nothing registered the stream holds nothing back.
func TestStreamWithoutSecretsPassesThrough(t *testing.T) {
	if reg.known.Load() != nil {
		t.Skip("another test registered values")
	}
	var out []string
	st := NewStream(func(s string) error { out = append(out, s); return nil })
	_ = st.Write("ab")
	if len(out) != 1 || out[0] != "ab" {
		t.Fatalf("out = %q", out)
	}
}

// reply is a typical chat reply: about 1 KiB of prose.
var reply = strings.Repeat("The quarterly report shows revenue growth of 12% across the region; see section 4.2 for details. ", 11)

func benchSecrets(b *testing.B, n int) {
	src := Register("bench")
	defer src.Close()
	rng := rand.New(rand.NewSource(1))
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	vals := make([]string, n)
	for i := range vals {
		k := make([]byte, 40)
		for j := range k {
			k[j] = alnum[rng.Intn(len(alnum))]
		}
		vals[i] = "sk-" + string(k)
	}
	src.Set(vals...)
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Secrets(reply)
	}
}

// BenchmarkSecrets is the scrub a chat reply gets (docs/benchmarks.md).
func BenchmarkSecrets(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) { benchSecrets(b, n) })
	}
}

// BenchmarkStream is the same reply streamed in 16-byte deltas.
func BenchmarkStream(b *testing.B) {
	src := Register("bench")
	defer src.Close()
	src.Set("sk-0123456789abcdefghijklmnopqrstuvwxyzABCD", "another-configured-secret-value")
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		st := NewStream(func(string) error { return nil })
		for j := 0; j < len(reply); j += 16 {
			_ = st.Write(reply[j:min(j+16, len(reply))])
		}
		_ = st.Flush()
	}
}

// A stream cut short passes on what it held, less an end that could be the
// start of a configured value.
func TestStreamCutDropsAPartialSecret(t *testing.T) {
	src := Register("test")
	defer src.Close()
	src.Set("zz-cut-secret-value-0123")
	var out strings.Builder
	st := NewStream(func(s string) error { out.WriteString(s); return nil })
	_ = st.Write("partial answer ")
	_ = st.Write("zz-cut-sec")
	if err := st.Cut(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "partial answer " {
		t.Fatalf("cut stream = %q", got)
	}
	out.Reset()
	st = NewStream(func(s string) error { out.WriteString(s); return nil })
	_ = st.Write("plain words")
	_ = st.Cut()
	if out.String() != "plain words" {
		t.Fatalf("cut stream = %q", out.String())
	}
}
