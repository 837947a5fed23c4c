package llm

import (
	"context"
	"testing"
)

// BenchmarkClientAgainstFake measures a whole call through client, retry wrapper and router against
// the fake on loopback, per wire format, with parallel callers.
func BenchmarkClientAgainstFake(b *testing.B) {
	f := startFake(b)
	for _, typ := range allTypes {
		for _, stream := range []bool{false, true} {
			name := typ
			if stream {
				name += "-stream"
			}
			b.Run(name, func(b *testing.B) {
				r := NewRouter(map[string]Provider{typ: fakeProvider(b, f, typ, nil)}, typ)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						_, err := r.Do(context.Background(), &Call{Model: "m", Request: userReq("", "benchmark message"), Stream: stream})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
