package runner

import (
	"strings"
)

// readTail reads the last limit bytes of a script's file written after offset from, as
// valid UTF-8.
func readTail(sandbox, name string, from, limit int64) string {
	f, err := openIn(sandbox, name)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	if from > info.Size() {
		from = 0 // rotated (RotateLog) since the run began: its output starts afresh
	}
	start := max(from, info.Size()-limit)
	buf := make([]byte, info.Size()-start)
	n, _ := f.ReadAt(buf, start)
	text := string(buf[:n])
	if start > from {
		// Cut at a line start so the tail does not begin mid-line or mid-character.
		if i := strings.IndexByte(text, '\n'); i >= 0 && i < len(text)-1 {
			text = text[i+1:]
		}
	}
	return strings.ToValidUTF8(text, "\uFFFD")
}
