package storage_test

import (
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
