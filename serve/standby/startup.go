package standby

import "rgcpred/serve/jsstart"

// DefaultStartWait is GroupConfig.StartWait's default (jsstart.DefaultWait).
const DefaultStartWait = jsstart.DefaultWait
