package main

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// A figure is an SVG document shown as <img src="data:image/svg+xml;base64,…"> (or with a
// URL-escaped data URI). nbconvert 6.5's HTML export sanitises inline SVG from image/svg+xml
// outputs down to the <svg> tag and its bare text, so a figure only survives export as an image.

var (
	imgTagRE = regexp.MustCompile(`(?is)<img\b[^>]*>`)
	srcRE    = regexp.MustCompile(`(?is)\bsrc\s*=\s*("[^"]*"|'[^']*')`)
	// inlineSVGRE finds inline <svg> elements, whose drawing a sanitiser may have removed.
	inlineSVGRE = regexp.MustCompile(`(?is)<svg\b.*?</svg>`)
	// scriptRE finds scripts, whose text (JavaScript that draws SVG, say) is not markup.
	scriptRE = regexp.MustCompile(`(?is)<script\b.*?</script>`)
)

// drawingElements are the SVG elements that put ink on the page.
var drawingElements = map[string]bool{
	"rect": true, "line": true, "polyline": true, "polygon": true, "path": true, "circle": true, "ellipse": true,
	"text": true, "image": true, "use": true,
}

// svgInfo is what a figure check needs to know about an SVG document.
type svgInfo struct {
	title         string
	width, height float64
	drawn         int // drawing elements (rect, line, path, text, ...)
	shapes        int // drawing elements other than text
}

// parseSVG reads an SVG document: its size (width/height, else the viewBox), title and drawing
// elements. The root must be <svg>.
func parseSVG(data []byte) (svgInfo, error) {
	var info svgInfo
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	depth := 0
	inTitle := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return info, fmt.Errorf("not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if t.Name.Local != "svg" {
					return info, fmt.Errorf("root element is <%s>, want <svg>", t.Name.Local)
				}
				var viewBox string
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "width":
						info.width = svgLength(a.Value)
					case "height":
						info.height = svgLength(a.Value)
					case "viewBox":
						viewBox = a.Value
					}
				}
				if f := strings.Fields(strings.ReplaceAll(viewBox, ",", " ")); len(f) == 4 && (info.width == 0 || info.height == 0) {
					info.width, info.height = svgLength(f[2]), svgLength(f[3])
				}
			}
			depth++
			if drawingElements[t.Name.Local] {
				info.drawn++
				if t.Name.Local != "text" {
					info.shapes++
				}
			}
			inTitle = t.Name.Local == "title" && info.title == ""
		case xml.CharData:
			if inTitle {
				info.title += string(t)
			}
		case xml.EndElement:
			depth--
			inTitle = false
		}
	}
	if depth != 0 || (info.width == 0 && info.height == 0 && info.drawn == 0) {
		return info, errors.New("no <svg> element")
	}
	return info, nil
}

// svgLength reads an SVG length such as 640, 640px or 12.5; 0 for anything else.
func svgLength(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "px"), 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// decodeDataURI returns the bytes of a data: URI of MIME type image/svg+xml (base64 or
// URL-escaped), and false for any other src.
func decodeDataURI(src string) ([]byte, bool, error) {
	rest, ok := strings.CutPrefix(src, "data:")
	if !ok {
		return nil, false, nil
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, true, errors.New("data URI without a comma")
	}
	params := strings.Split(meta, ";")
	if !strings.EqualFold(strings.TrimSpace(params[0]), "image/svg+xml") {
		return nil, false, nil
	}
	for _, p := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
			if err != nil {
				return nil, true, fmt.Errorf("bad base64: %w", err)
			}
			return b, true, nil
		}
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return nil, true, fmt.Errorf("bad URL escape: %w", err)
	}
	return []byte(s), true, nil
}

// minShapes is the fewest non-text drawing elements a figure holds: a figure is more than its
// white background.
const minShapes = 2

// checkExportedHTML checks the figures of an HTML page exported from a notebook: every <img>
// with an SVG data URI must decode to an SVG document of non-zero size that draws something
// (more than its background), and no inline <svg> outside scripts may be blank (a sanitiser's leftover: the tag
// and its text, no shapes). It returns the figures found and their problems.
func checkExportedHTML(page []byte) (figures []svgInfo, probs []problem) {
	page = scriptRE.ReplaceAll(page, nil)
	for i, tag := range imgTagRE.FindAll(page, -1) {
		m := srcRE.FindSubmatch(tag)
		if m == nil {
			continue
		}
		src := html.UnescapeString(string(m[1][1 : len(m[1])-1]))
		data, isSVG, err := decodeDataURI(src)
		if !isSVG {
			continue
		}
		where := fmt.Sprintf("image %d (%s)", i+1, head(string(tag), 1))
		if len(where) > 120 {
			where = where[:120] + "…)"
		}
		if err != nil {
			probs = append(probs, problem{Msg: fmt.Sprintf("%s: SVG data URI: %v", where, err)})
			continue
		}
		info, err := parseSVG(data)
		switch {
		case err != nil:
			probs = append(probs, problem{Msg: fmt.Sprintf("%s: %v", where, err)})
		case info.width <= 0 || info.height <= 0:
			probs = append(probs, problem{Msg: fmt.Sprintf("figure %q: size %gx%g: an empty figure", info.title, info.width, info.height)})
		case info.shapes < minShapes:
			probs = append(probs, problem{Msg: fmt.Sprintf("figure %q: %d shapes: a blank figure", info.title, info.shapes)})
		default:
			figures = append(figures, info)
		}
	}
	for _, el := range inlineSVGRE.FindAll(page, -1) {
		info, err := parseSVG(el)
		if err == nil && info.shapes > 0 {
			continue
		}
		probs = append(probs, problem{Msg: "a blank inline <svg> (sanitised on export: the figure is lost): " + head(stripTags(string(el)), 1)})
	}
	return figures, probs
}

// isFigure reports whether o shows an SVG figure as an image with a data URI (nbui.SVG), the form
// that survives export.
func isFigure(o output) bool {
	return strings.Contains(string(o.Data["text/html"]), "data:image/svg+xml")
}
