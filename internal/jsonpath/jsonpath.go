// Package jsonpath is the path syntax of webhook mappings (`issue.title`,
// `$.items[0].text`): one parser, used when an agent definition is loaded
// (so a bad path is refused at load) and when a payload is mapped.
package jsonpath

import (
	"fmt"
	"strings"
)

// Parse splits a path into segments: "$.a.b[0].c" -> a, b, 0, c. An empty
// segment ("a..b", "a.", "[]") or an unclosed bracket is an error.
func Parse(p string) ([]string, error) {
	orig := p
	p = strings.TrimSpace(p)
	p = strings.TrimPrefix(p, "$")
	p = strings.TrimPrefix(p, ".")
	var segs []string
	for p != "" {
		switch {
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", orig)
			}
			idx := strings.Trim(p[1:end], `"' `)
			if idx == "" {
				return nil, fmt.Errorf("path %q: empty []", orig)
			}
			segs = append(segs, idx)
			p = p[end+1:]
			p = strings.TrimPrefix(p, ".")
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			if end == 0 {
				return nil, fmt.Errorf("path %q: empty segment", orig)
			}
			segs = append(segs, p[:end])
			p = p[end:]
			if strings.HasPrefix(p, ".") {
				p = p[1:]
				if p == "" {
					return nil, fmt.Errorf("path %q: ends with a dot", orig)
				}
			}
		}
	}
	return segs, nil
}
