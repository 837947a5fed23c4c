package knowledge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Kinds of documents text is extracted from.
const (
	KindText     = "text"
	KindMarkdown = "markdown"
	KindHTML     = "html"
	KindPDF      = "pdf"
)

// ErrUnsupported marks a document whose type has no extractor or whose
// content is binary; the document is failed with the reason.
var ErrUnsupported = errors.New("unsupported document")

// kindByExt maps file extensions to kinds; a file without a known one is
// unsupported.
var kindByExt = map[string]string{
	".txt": KindText, ".text": KindText, ".log": KindText, ".csv": KindText, ".rst": KindText,
	".md": KindMarkdown, ".markdown": KindMarkdown, ".mdx": KindMarkdown,
	".html": KindHTML, ".htm": KindHTML, ".xhtml": KindHTML,
	".pdf": KindPDF,
}

// KindOf is the kind of a document by its name (a path or URL path) and,
// when given, its Content-Type; "" when unsupported.
func KindOf(name, contentType string) string {
	ct := strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	switch ct {
	case "text/html", "application/xhtml+xml":
		return KindHTML
	case "application/pdf":
		return KindPDF
	case "text/markdown", "text/x-markdown":
		return KindMarkdown
	case "text/plain":
		if k := kindByExt[strings.ToLower(path.Ext(name))]; k == KindMarkdown {
			return k
		}
		return KindText
	}
	return kindByExt[strings.ToLower(path.Ext(name))]
}

// Supported reports whether a file name has an extractor (folders and
// globs take only these).
func Supported(name string) bool { return kindByExt[strings.ToLower(path.Ext(name))] != "" }

// Extract returns the text of a document of kind. Binary content, a PDF
// that does not parse and an unknown kind return an error wrapping
// ErrUnsupported (or saying what failed).
func Extract(kind string, data []byte) (string, error) {
	switch kind {
	case KindText, KindMarkdown:
		return plainText(data)
	case KindHTML:
		return htmlText(data)
	case KindPDF:
		return pdfText(data)
	}
	return "", fmt.Errorf("%w: no text extractor for this file type", ErrUnsupported)
}

func plainText(data []byte) (string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", fmt.Errorf("%w: binary content (not UTF-8 text)", ErrUnsupported)
	}
	return strings.ReplaceAll(string(data), "\r\n", "\n"), nil
}

// htmlText is the visible text of an HTML page: script, style and the
// like are dropped; block elements end paragraphs.
func htmlText(data []byte) (string, error) {
	if bytes.IndexByte(data, 0) >= 0 {
		return "", fmt.Errorf("%w: binary content in an HTML document", ErrUnsupported)
	}
	root, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("parse HTML: %w", err)
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Head, atom.Iframe:
				return
			}
		}
		if n.Type == html.TextNode {
			t := strings.Join(strings.Fields(n.Data), " ")
			if t != "" {
				if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
					b.WriteByte(' ')
				}
				b.WriteString(t)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blockElement(n.DataAtom) && b.Len() > 0 && !strings.HasSuffix(b.String(), "\n\n") {
			b.WriteString("\n\n")
		}
	}
	walk(root)
	return strings.TrimSpace(b.String()), nil
}

func blockElement(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Br, atom.Li, atom.Ul, atom.Ol, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Tr, atom.Table, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Pre, atom.Blockquote, atom.Dd, atom.Dt, atom.Title:
		return true
	}
	return false
}

// pdfText extracts the text of a PDF with github.com/ledongthuc/pdf (pure
// Go). The library can panic on malformed files; that is a failed
// document, not a crash.
func pdfText(data []byte) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("the PDF does not parse: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("the PDF does not parse: %w", err)
	}
	plain, err := r.GetPlainText()
	if err != nil {
		return "", fmt.Errorf("the PDF does not parse: %w", err)
	}
	out, err := io.ReadAll(plain)
	if err != nil {
		return "", fmt.Errorf("read the PDF's text: %w", err)
	}
	if !utf8.Valid(out) {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	s := strings.TrimSpace(string(out))
	if s == "" {
		return "", fmt.Errorf("%w: the PDF has no extractable text (scanned images need OCR)", ErrUnsupported)
	}
	return s, nil
}
