package assembly

import (
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// testEnv is this test process's environment and files, as the command hands them in.
var testEnv = Env{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile}

// testConfig is c with testEnv.
func testConfig(c *configs.Config) *Config { return &Config{Config: c, Env: testEnv} }
