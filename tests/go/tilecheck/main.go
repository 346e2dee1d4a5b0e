// Command tilecheck reads a C2SP tlog-tiles folder with Go's golang.org/x/mod/sumdb
// packages (an implementation nobody here wrote): it opens the checkpoint with the log's
// verifier key, recomputes the root from the hash tiles, and checks an inclusion proof,
// built from the tiles, for every entry of every entry bundle.
//
// Usage: tilecheck DIR VKEY
package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// dirTiles serves tiles from the folder. Go names a tile tile/8/L/N[.p/W] and an entry
// bundle tile/8/data/N; C2SP drops the height and says "entries".
type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return 8 }

func (d dirTiles) path(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), "tile/8/")
	if strings.HasPrefix(p, "data/") {
		p = "entries/" + strings.TrimPrefix(p, "data/")
	}
	return filepath.Join(d.dir, "tile", filepath.FromSlash(p))
}

func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := os.ReadFile(d.path(t))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (d dirTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tilecheck: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: tilecheck DIR VKEY")
	}
	dir, vkey := os.Args[1], os.Args[2]
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		fail("%v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != verifier.Name() {
		fail("checkpoint text is not origin, size, root")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("size: %v", err)
	}
	rootBytes, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rootBytes) != tlog.HashSize {
		fail("root: %v", err)
	}
	var root tlog.Hash
	copy(root[:], rootBytes)
	tiles := dirTiles{dir}
	hashes := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, tiles)
	got, err := tlog.TreeHash(size, hashes)
	if err != nil || got != root {
		fail("root from the tiles: %v (got %v)", err, got)
	}
	checked := int64(0)
	for k := int64(0); k*256 < size; k++ {
		width := size - k*256
		if width > 256 {
			width = 256
		}
		bundle, err := os.ReadFile(tiles.path(tlog.Tile{H: 8, L: -1, N: k, W: int(width)}))
		if err != nil {
			fail("%v", err)
		}
		for i := int64(0); i < width; i++ {
			if len(bundle) < 2 {
				fail("bundle %d ends early", k)
			}
			length := int(binary.BigEndian.Uint16(bundle))
			if len(bundle) < 2+length {
				fail("bundle %d ends inside an entry", k)
			}
			entry := bundle[2 : 2+length]
			bundle = bundle[2+length:]
			index := k*256 + i
			proof, err := tlog.ProveRecord(size, index, hashes)
			if err != nil {
				fail("proof of %d: %v", index, err)
			}
			if err := tlog.CheckRecord(proof, size, root, index, tlog.RecordHash(entry)); err != nil {
				fail("entry %d: %v", index, err)
			}
			checked++
		}
		if len(bundle) != 0 {
			fail("bundle %d holds more than %d entries", k, width)
		}
	}
	fmt.Printf("ok: %d entries proven into root %s of %s\n", checked, lines[2], lines[0])
}
