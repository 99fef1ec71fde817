// Package units formats numbers for people: whole numbers with thousands separators and byte
// counts in binary units. It is the one place octlm's commands, loader, progress bars and
// notebooks format them, so the same number reads the same everywhere.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Commas writes n with commas between groups of three digits: 596,049,920.
func Commas(n int64) string { return GroupDigits(strconv.FormatInt(n, 10)) }

// GroupDigits writes a whole number given as text ("-1234567", any length) with commas between
// groups of three digits ("-1,234,567"); any other text comes back unchanged.
func GroupDigits(s string) string {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return s
	}
	var b strings.Builder
	if len(digits) != len(s) {
		b.WriteByte('-')
	}
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// Bytes formats a byte count with binary units and three significant decimals: "512 B",
// "1.40 GiB".
func Bytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-max(n, -math.MaxInt64))
	}
	return BytesFloat(float64(n))
}

// BytesFloat is Bytes for sizes that may not fit an int64 (an estimate for a huge config).
func BytesFloat(n float64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", int64(n))
	}
	exp := 0
	for n >= unit*unit && exp < 5 {
		n /= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", n/unit, "KMGTPE"[exp])
}
