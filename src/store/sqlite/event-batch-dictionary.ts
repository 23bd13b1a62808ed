/**
 * The dictionary of event batch codec 1 (see event-batch-codec.ts): what Keel's events look like,
 * their ids and hashes left out, the most common last. Rows written with codec 1 are read with
 * exactly this text: never change it (a new dictionary is a new codec).
 */
export const EVENT_BATCH_DICTIONARY_1 =
  '{"t":"session/updated","d":{"title":""}}{"t":"session/archived"}{"t":"leaf/move","d":{"entryId":' +
  '"","reason":"switch"}}{"t":"leaf/move","d":{"reason":"fork"}}{"t":"branch/summary","d":{"summary' +
  '":""}}{"t":"compaction","d":{"summary":"","firstKeptEntryId":"","tokensBefore":}}{"t":"compactio' +
  'n/failed","d":{"reason":"threshold","error":""}}{"t":"config/change","d":{"model":{"provider":"o' +
  'penai","modelId":""},"settings":{"temperature":}}}{"t":"model/retry","d":{"attempt":2,"delayMs":' +
  ',"error":{"kind":"","message":"","retryable":true},"abandonedMessageId":""}}{"t":"model/error","' +
  'd":{"willCompact":false}}{"t":"run/interrupted","d":{"reason":"lease expired"}}{"d":{"from":"run' +
  'ning","to":"waiting_approval"}}{"d":{"from":"running","to":"waiting_for_user"}}{"d":{"from":"run' +
  'ning","to":"paused"}}{"d":{"from":"running","to":"failed","attempt":1,"error":{"code":"","messag' +
  'e":""}}}{"d":{"from":"running","to":"cancelled"}}{"d":{"to":"timed_out"}}{"t":"tool/approval","d' +
  '":{"toolCallId":"","toolName":"","input":{},"assistantMessageId":""}}{"t":"tool/decision","d":{"' +
  'toolCallId":"","approved":true,"reason":""}}{"t":"user/question","d":{"toolCallId":"","toolName"' +
  ':"ask_user","input":{"question":""},"assistantMessageId":""}}{"t":"user/answer","d":{"toolCallId' +
  '":"","answer":""}}{"type":"reasoning","text":""}{"type":"file","mediaType":"image/png","data":""' +
  '}{"output":{"type":"text","value":""}}{"output":{"type":"error-text","value":""}}{"output":{"typ' +
  'e":"error-json","value":{}}}"finishReason":"stop","finishReason":"length","reason":"final","reas' +
  'on":"interrupted","reason":"completed","reason":"max_steps","via":"steer","resumed":true[{"i":""' +
  ',"t":"session/created","v":1,"m":1796130040553,"d":{"title":null,"metadata":{},"agent":"bench","' +
  'origin":null}},{"i":"","t":"user/message","v":1,"m":1796130040559,"r":"","u":1,"e":1,"d":{"messa' +
  'ge":{"id":"","role":"user","content":[{"type":"text","text":"Task"}]},"via":"input"}},{"i":"","t' +
  '":"run/status","v":1,"m":1796130040560,"r":"","u":1,"d":{"from":null,"to":"queued","attempt":0,"' +
  'agent":{"name":"bench","version":"1"}}},{"i":"","t":"run/status","v":1,"m":1796130040562,"r":"",' +
  '"u":1,"d":{"from":"queued","to":"running","attempt":1,"reason":"claimed by w"}},{"i":"","t":"tur' +
  'n/start","v":1,"m":1796130040572,"r":"","u":1,"d":{"agent":{"name":"bench","version":"1"},"model' +
  '":{"provider":"scripted","modelId":"scripted-1"},"resumed":false}}][{"i":"","t":"step/start","v"' +
  ':1,"m":1796130040588,"r":"","u":1,"s":4,"d":{}},{"i":"","t":"request/header","v":2,"m":179613004' +
  '0588,"r":"","u":1,"s":4,"d":{"provider":"scripted","modelId":"scripted-1","attempt":1,"messageId' +
  '":"","settings":{},"system":"sha256:","tools":"sha256:","context":{"messages":7,"first":"","last' +
  '":""},"promptHash":""}},{"i":"","t":"assistant/message","v":1,"m":1796130040588,"r":"","u":1,"s"' +
  ':4,"e":1,"p":"","d":{"message":{"id":"","role":"assistant","content":[{"type":"text","text":"don' +
  'e"}]},"finishReason":"stop","usage":{"inputTokens":10,"outputTokens":5,"cachedInputTokens":0,"re' +
  'asoningTokens":0},"cost":0,"responseId":"resp_4","responseModelId":"scripted-1","timing":{"start' +
  'edAt":1796130040588,"firstChunkMs":0,"durationMs":0}}},{"i":"","t":"step/end","v":1,"m":17961300' +
  '40588,"r":"","u":1,"s":4,"d":{"reason":"final","usage":{"inputTokens":10,"outputTokens":5,"cache' +
  'dInputTokens":0,"reasoningTokens":0}}},{"i":"","t":"turn/end","v":1,"m":1796130040588,"r":"","u"' +
  ':1,"d":{"reason":"completed","steps":4,"usage":{"inputTokens":40,"outputTokens":20,"cachedInputT' +
  'okens":0,"reasoningTokens":0},"cost":0}},{"i":"","t":"run/status","v":1,"m":1796130040589,"r":""' +
  ',"u":1,"d":{"from":"running","to":"completed","attempt":1}}][{"i":"","t":"step/start","v":1,"m":' +
  '1796130040584,"r":"","u":1,"s":2,"d":{}},{"i":"","t":"request/header","v":2,"m":1796130040585,"r' +
  '":"","u":1,"s":2,"d":{"provider":"scripted","modelId":"scripted-1","attempt":1,"messageId":"","s' +
  'ettings":{},"system":"sha256:","tools":"sha256:","context":{"messages":3,"first":"","last":""},"' +
  'promptHash":""}},{"i":"","t":"assistant/message","v":1,"m":1796130040585,"r":"","u":1,"s":2,"e":' +
  '1,"p":"","d":{"message":{"id":"","role":"assistant","content":[{"type":"text","text":"working"},' +
  '{"type":"tool-call","toolCallId":"call_2_0","toolName":"inc","input":{"n":1}}]},"finishReason":"' +
  'tool-calls","usage":{"inputTokens":10,"outputTokens":5,"cachedInputTokens":0,"reasoningTokens":0' +
  '},"cost":0,"responseId":"resp_2","responseModelId":"scripted-1","timing":{"startedAt":1796130040' +
  '585,"firstChunkMs":0,"durationMs":0}}},{"i":"","t":"tool/call","v":1,"m":1796130040585,"r":"","u' +
  '":1,"s":2,"d":{"toolCallId":"call_2_0","toolName":"inc","input":{"n":1},"idempotencyKey":"","ass' +
  'istantMessageId":""}},{"i":"","t":"tool/result","v":1,"m":1796130040586,"r":"","u":1,"s":2,"e":1' +
  ',"p":"","d":{"toolCallId":"call_2_0","toolName":"inc","output":{"type":"json","value":2},"toolMe' +
  'ssageId":"","durationMs":0}},{"i":"","t":"step/end","v":1,"m":1796130040586,"r":"","u":1,"s":2,"' +
  'd":{"reason":"tool-calls","usage":{"inputTokens":10,"outputTokens":5,"cachedInputTokens":0,"reas' +
  'oningTokens":0}}}]';
