package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseMemoryLimit reads server.memory_limit in Go's GOMEMLIMIT syntax: a
// number of bytes with an optional B, KiB, MiB, GiB or TiB suffix. "", "0"
// and "off" are no limit (0).
func ParseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" || strings.EqualFold(s, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mul    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mul := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mul = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (use bytes or a B, KiB, MiB, GiB or TiB suffix, e.g. 512MiB; 0 or off for none)", s)
	}
	if n > math.MaxInt64/mul {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mul, nil
}
