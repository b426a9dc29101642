"""The console's own schemas compiled to Python code that proves documents valid
(guardrails/engine/schema_code.py), written by `make proofs`: do not edit.

A test fails when this file is not what the schemas and the generator give today.
"""

# ruff: noqa
# mypy: ignore-errors
from guardrails.engine.schema_code_helpers import BIG, END, LOW, NO_END, Unsure, date_time, date_times, plain, regex, type_miss, unique_strings


def _proof1():
    _c5 = frozenset(('agent', 'citations', 'endedAt', 'flow', 'id', 'input', 'messages', 'metadata', 'output', 'startedAt', 'tenant', 'toolCalls', 'usage'))
    _c17 = frozenset(('content', 'name', 'role', 'toolCallId'))
    _c20 = frozenset(('assistant', 'system', 'tool', 'user'))
    _c26 = frozenset(('arguments', 'endedAt', 'error', 'id', 'name', 'result', 'startedAt'))
    _c37 = frozenset(('quote', 'source', 'title'))
    _c43 = frozenset(('costUsd', 'inputTokens', 'model', 'outputTokens'))
    _c50 = frozenset(('costUsd', 'inputTokens', 'model', 'outputTokens'))
    _c56 = frozenset(('quote', 'source', 'title'))
    _c61 = frozenset(('arguments', 'endedAt', 'error', 'id', 'name', 'result', 'startedAt'))
    _c70 = frozenset(('content', 'name', 'role', 'toolCallId'))
    _c73 = frozenset(('assistant', 'system', 'tool', 'user'))
    def _root(x):
        try:
            _d = []
            if not (type(x) is dict) and not type_miss(x): return False
            if 'id' not in x: return False
            if not _c5.issuperset(x):
                for _k6 in x:
                    if type(_k6) is not str: raise Unsure
                return False
            _p7 = x['id']
            if not (type(_p7) is str) and not type_miss(_p7): return False
            if not (1 <= len(_p7) <= 200): return False
            if 'tenant' in x:
                _p8 = x['tenant']
                if not (type(_p8) is str) and not type_miss(_p8): return False
                if not (1 <= len(_p8) <= 100): return False
            if 'agent' in x:
                _p9 = x['agent']
                if not (type(_p9) is str) and not type_miss(_p9): return False
            if 'flow' in x:
                _p10 = x['flow']
                if not (type(_p10) is str) and not type_miss(_p10): return False
            if 'startedAt' in x:
                _p11 = x['startedAt']
                if not (type(_p11) is str) and not type_miss(_p11): return False
                _d.append(_p11)
            if 'endedAt' in x:
                _p12 = x['endedAt']
                if not (type(_p12) is str) and not type_miss(_p12): return False
                _d.append(_p12)
            if 'input' in x:
                _p13 = x['input']
                if not (type(_p13) is str or _p13 is None) and not type_miss(_p13): return False
            if 'output' in x:
                _p14 = x['output']
                if not (type(_p14) is str or _p14 is None) and not type_miss(_p14): return False
            if 'messages' in x:
                _p15 = x['messages']
                if not (type(_p15) is list) and not type_miss(_p15): return False
                for _i16 in _p15:
                    if not (type(_i16) is dict) and not type_miss(_i16): return False
                    if 'role' not in _i16: return False
                    if 'content' not in _i16: return False
                    if not _c17.issuperset(_i16):
                        for _k18 in _i16:
                            if type(_k18) is not str: raise Unsure
                        return False
                    _p19 = _i16['role']
                    if not (type(_p19) is str and _p19 in _c20): return type_miss(_p19)
                    _p21 = _i16['content']
                    if not (type(_p21) is str or _p21 is None) and not type_miss(_p21): return False
                    if 'name' in _i16:
                        _p22 = _i16['name']
                        if not (type(_p22) is str) and not type_miss(_p22): return False
                    if 'toolCallId' in _i16:
                        _p23 = _i16['toolCallId']
                        if not (type(_p23) is str) and not type_miss(_p23): return False
            if 'toolCalls' in x:
                _p24 = x['toolCalls']
                if not (type(_p24) is list) and not type_miss(_p24): return False
                for _i25 in _p24:
                    if not (type(_i25) is dict) and not type_miss(_i25): return False
                    if 'name' not in _i25: return False
                    if not _c26.issuperset(_i25):
                        for _k27 in _i25:
                            if type(_k27) is not str: raise Unsure
                        return False
                    _p28 = _i25['name']
                    if not (type(_p28) is str) and not type_miss(_p28): return False
                    if not (1 <= len(_p28) <= 200): return False
                    if 'id' in _i25:
                        _p29 = _i25['id']
                        if not (type(_p29) is str) and not type_miss(_p29): return False
                    if 'error' in _i25:
                        _p32 = _i25['error']
                        if not (type(_p32) is str or _p32 is None) and not type_miss(_p32): return False
                    if 'startedAt' in _i25:
                        _p33 = _i25['startedAt']
                        if not (type(_p33) is str) and not type_miss(_p33): return False
                        _d.append(_p33)
                    if 'endedAt' in _i25:
                        _p34 = _i25['endedAt']
                        if not (type(_p34) is str) and not type_miss(_p34): return False
                        _d.append(_p34)
            if 'citations' in x:
                _p35 = x['citations']
                if not (type(_p35) is list) and not type_miss(_p35): return False
                for _i36 in _p35:
                    if not (type(_i36) is dict) and not type_miss(_i36): return False
                    if 'source' not in _i36: return False
                    if not _c37.issuperset(_i36):
                        for _k38 in _i36:
                            if type(_k38) is not str: raise Unsure
                        return False
                    _p39 = _i36['source']
                    if not (type(_p39) is str) and not type_miss(_p39): return False
                    if 'title' in _i36:
                        _p40 = _i36['title']
                        if not (type(_p40) is str) and not type_miss(_p40): return False
                    if 'quote' in _i36:
                        _p41 = _i36['quote']
                        if not (type(_p41) is str) and not type_miss(_p41): return False
            if 'usage' in x:
                _p42 = x['usage']
                if not (type(_p42) is dict) and not type_miss(_p42): return False
                if not _c43.issuperset(_p42):
                    for _k44 in _p42:
                        if type(_k44) is not str: raise Unsure
                    return False
                if 'inputTokens' in _p42:
                    _p45 = _p42['inputTokens']
                    if not ((type(_p45) is int and LOW < _p45 < BIG)) and not type_miss(_p45): return False
                    if not (_p45 >= 0): return False
                if 'outputTokens' in _p42:
                    _p46 = _p42['outputTokens']
                    if not ((type(_p46) is int and LOW < _p46 < BIG)) and not type_miss(_p46): return False
                    if not (_p46 >= 0): return False
                if 'costUsd' in _p42:
                    _p47 = _p42['costUsd']
                    if not ((type(_p47) is int and LOW < _p47 < BIG or type(_p47) is float and NO_END < _p47 < END)) and not type_miss(_p47): return False
                    if not (_p47 >= 0): return False
                if 'model' in _p42:
                    _p48 = _p42['model']
                    if not (type(_p48) is str) and not type_miss(_p48): return False
            if 'metadata' in x:
                _p49 = x['metadata']
                if not (type(_p49) is dict) and not type_miss(_p49): return False
            if _d: date_times(_d)
            return True
        except (Unsure, RecursionError):
            return False
    def _f4(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if not _c50.issuperset(x):
            for _k51 in x:
                if type(_k51) is not str: raise Unsure
            return False
        if 'inputTokens' in x:
            _p52 = x['inputTokens']
            if not ((type(_p52) is int and LOW < _p52 < BIG)) and not type_miss(_p52): return False
            if not (_p52 >= 0): return False
        if 'outputTokens' in x:
            _p53 = x['outputTokens']
            if not ((type(_p53) is int and LOW < _p53 < BIG)) and not type_miss(_p53): return False
            if not (_p53 >= 0): return False
        if 'costUsd' in x:
            _p54 = x['costUsd']
            if not ((type(_p54) is int and LOW < _p54 < BIG or type(_p54) is float and NO_END < _p54 < END)) and not type_miss(_p54): return False
            if not (_p54 >= 0): return False
        if 'model' in x:
            _p55 = x['model']
            if not (type(_p55) is str) and not type_miss(_p55): return False
        return True
    def _f3(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'source' not in x: return False
        if not _c56.issuperset(x):
            for _k57 in x:
                if type(_k57) is not str: raise Unsure
            return False
        _p58 = x['source']
        if not (type(_p58) is str) and not type_miss(_p58): return False
        if 'title' in x:
            _p59 = x['title']
            if not (type(_p59) is str) and not type_miss(_p59): return False
        if 'quote' in x:
            _p60 = x['quote']
            if not (type(_p60) is str) and not type_miss(_p60): return False
        return True
    def _f2(x):
        _d = []
        if not (type(x) is dict) and not type_miss(x): return False
        if 'name' not in x: return False
        if not _c61.issuperset(x):
            for _k62 in x:
                if type(_k62) is not str: raise Unsure
            return False
        _p63 = x['name']
        if not (type(_p63) is str) and not type_miss(_p63): return False
        if not (1 <= len(_p63) <= 200): return False
        if 'id' in x:
            _p64 = x['id']
            if not (type(_p64) is str) and not type_miss(_p64): return False
        if 'error' in x:
            _p67 = x['error']
            if not (type(_p67) is str or _p67 is None) and not type_miss(_p67): return False
        if 'startedAt' in x:
            _p68 = x['startedAt']
            if not (type(_p68) is str) and not type_miss(_p68): return False
            _d.append(_p68)
        if 'endedAt' in x:
            _p69 = x['endedAt']
            if not (type(_p69) is str) and not type_miss(_p69): return False
            _d.append(_p69)
        if _d: date_times(_d)
        return True
    def _f1(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'role' not in x: return False
        if 'content' not in x: return False
        if not _c70.issuperset(x):
            for _k71 in x:
                if type(_k71) is not str: raise Unsure
            return False
        _p72 = x['role']
        if not (type(_p72) is str and _p72 in _c73): return type_miss(_p72)
        _p74 = x['content']
        if not (type(_p74) is str or _p74 is None) and not type_miss(_p74): return False
        if 'name' in x:
            _p75 = x['name']
            if not (type(_p75) is str) and not type_miss(_p75): return False
        if 'toolCallId' in x:
            _p76 = x['toolCallId']
            if not (type(_p76) is str) and not type_miss(_p76): return False
        return True
    return _root


def _proof2():
    _c3 = frozenset(('action', 'budget', 'check', 'checkBuiltIn', 'codeArtifactRef', 'config', 'configSchema', 'description', 'id', 'judgeCapabilities', 'kind', 'limits', 'name', 'needsSpec', 'network', 'sandbox', 'scope', 'severity'))
    _c11 = frozenset(())
    _c16 = frozenset(('compensateWith', 'escalateTo', 'on-violation', 'retry'))
    _c20 = frozenset(('maxAttempts',))
    _c26 = frozenset(('critical', 'error', 'info', 'warn'))
    _c28 = frozenset(('agents', 'flows', 'tenants', 'when'))
    _c31 = frozenset(('always', 'ci-only', 'runtime-only'))
    _c39 = frozenset(('maxCostUsd', 'maxLatencyMs'))
    _c44 = frozenset(('context-isolated', 'none', 'strict'))
    _c46 = frozenset(('cpuMs', 'memMB'))
    _c54 = frozenset(('bindings', 'capabilities', 'config', 'env', 'secrets'))
    _c57 = frozenset(())
    _c61 = frozenset(())
    _c65 = frozenset(())
    _c77 = frozenset(())
    _c80 = frozenset(('kind', 'modulePath'))
    _c83 = frozenset(('filesystem',))
    _c85 = frozenset(('artifactVersion', 'imageRef', 'kind', 'modulePath'))
    _c88 = frozenset(('oci',))
    _c92 = frozenset(('hosts', 'kind'))
    _c95 = frozenset(('allowlist',))
    _c98 = frozenset(('kind',))
    _c101 = frozenset(('none', 'unrestricted'))
    _c102 = frozenset(('agents', 'flows', 'tenants', 'when'))
    _c105 = frozenset(('always', 'ci-only', 'runtime-only'))
    _c112 = frozenset(('compensateWith', 'escalateTo', 'on-violation', 'retry'))
    _c116 = frozenset(('maxAttempts',))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'id' not in x: return False
            if 'kind' not in x: return False
            if 'check' not in x: return False
            if 'action' not in x: return False
            if not _c3.issuperset(x):
                for _k4 in x:
                    if type(_k4) is not str: raise Unsure
                return False
            _p5 = x['id']
            if not (type(_p5) is str) and not type_miss(_p5): return False
            if 'name' in x:
                _p6 = x['name']
                if not (type(_p6) is str) and not type_miss(_p6): return False
            if 'description' in x:
                _p7 = x['description']
                if not (type(_p7) is str) and not type_miss(_p7): return False
            _p8 = x['kind']
            if not (type(_p8) is str) and not type_miss(_p8): return False
            if not (len(_p8) >= 1): return False
            _p9 = x['check']
            if not (type(_p9) is str) and not type_miss(_p9): return False
            if 'config' in x:
                _p10 = x['config']
                if not (type(_p10) is dict) and not type_miss(_p10): return False
                for _k12, _a13 in _p10.items():
                    if type(_k12) is not str: raise Unsure
                    if _k12 not in _c11:
                        pass
            if 'configSchema' in x:
                _p14 = x['configSchema']
                if not (type(_p14) is dict) and not type_miss(_p14): return False
            _p15 = x['action']
            if not (type(_p15) is dict) and not type_miss(_p15): return False
            if 'on-violation' not in _p15: return False
            if not _c16.issuperset(_p15):
                for _k17 in _p15:
                    if type(_k17) is not str: raise Unsure
                return False
            _p18 = _p15['on-violation']
            if not (type(_p18) is str) and not type_miss(_p18): return False
            if not (len(_p18) >= 1): return False
            if 'retry' in _p15:
                _p19 = _p15['retry']
                if not (type(_p19) is dict) and not type_miss(_p19): return False
                if 'maxAttempts' not in _p19: return False
                if not _c20.issuperset(_p19):
                    for _k21 in _p19:
                        if type(_k21) is not str: raise Unsure
                    return False
                _p22 = _p19['maxAttempts']
                if not ((type(_p22) is int and LOW < _p22 < BIG)) and not type_miss(_p22): return False
            if 'escalateTo' in _p15:
                _p23 = _p15['escalateTo']
                if not (type(_p23) is str) and not type_miss(_p23): return False
            if 'compensateWith' in _p15:
                _p24 = _p15['compensateWith']
                if not (type(_p24) is str) and not type_miss(_p24): return False
            if 'severity' in x:
                _p25 = x['severity']
                if not (type(_p25) is str and _p25 in _c26): return type_miss(_p25)
            if 'scope' in x:
                _p27 = x['scope']
                if not (type(_p27) is dict) and not type_miss(_p27): return False
                if not _c28.issuperset(_p27):
                    for _k29 in _p27:
                        if type(_k29) is not str: raise Unsure
                    return False
                if 'when' in _p27:
                    _p30 = _p27['when']
                    if not (type(_p30) is str and _p30 in _c31): return type_miss(_p30)
                if 'agents' in _p27:
                    _p32 = _p27['agents']
                    if not (type(_p32) is list) and not type_miss(_p32): return False
                    for _i33 in _p32:
                        if not (type(_i33) is str) and not type_miss(_i33): return False
                if 'flows' in _p27:
                    _p34 = _p27['flows']
                    if not (type(_p34) is list) and not type_miss(_p34): return False
                    for _i35 in _p34:
                        if not (type(_i35) is str) and not type_miss(_i35): return False
                if 'tenants' in _p27:
                    _p36 = _p27['tenants']
                    if not (type(_p36) is list) and not type_miss(_p36): return False
                    for _i37 in _p36:
                        if not (type(_i37) is str) and not type_miss(_i37): return False
            if 'budget' in x:
                _p38 = x['budget']
                if not (type(_p38) is dict) and not type_miss(_p38): return False
                if not _c39.issuperset(_p38):
                    for _k40 in _p38:
                        if type(_k40) is not str: raise Unsure
                    return False
                if 'maxCostUsd' in _p38:
                    _p41 = _p38['maxCostUsd']
                    if not ((type(_p41) is int and LOW < _p41 < BIG or type(_p41) is float and NO_END < _p41 < END)) and not type_miss(_p41): return False
                if 'maxLatencyMs' in _p38:
                    _p42 = _p38['maxLatencyMs']
                    if not ((type(_p42) is int and LOW < _p42 < BIG)) and not type_miss(_p42): return False
            if 'sandbox' in x:
                _p43 = x['sandbox']
                if not (type(_p43) is str and _p43 in _c44): return type_miss(_p43)
            if 'limits' in x:
                _p45 = x['limits']
                if not (type(_p45) is dict) and not type_miss(_p45): return False
                if 'memMB' not in _p45: return False
                if 'cpuMs' not in _p45: return False
                if not _c46.issuperset(_p45):
                    for _k47 in _p45:
                        if type(_k47) is not str: raise Unsure
                    return False
                _p48 = _p45['memMB']
                if not ((type(_p48) is int and LOW < _p48 < BIG)) and not type_miss(_p48): return False
                _p49 = _p45['cpuMs']
                if not ((type(_p49) is int and LOW < _p49 < BIG)) and not type_miss(_p49): return False
            if 'network' in x:
                _p50 = x['network']
                if not (type(_p50) is dict) and not type_miss(_p50): return False
                if not sum((_f51(_p50), _f52(_p50),)) == 1: return False
            if 'needsSpec' in x:
                _p53 = x['needsSpec']
                if not (type(_p53) is dict) and not type_miss(_p53): return False
                if not _c54.issuperset(_p53):
                    for _k55 in _p53:
                        if type(_k55) is not str: raise Unsure
                    return False
                if 'env' in _p53:
                    _p56 = _p53['env']
                    if not (type(_p56) is dict) and not type_miss(_p56): return False
                    for _k58, _a59 in _p56.items():
                        if type(_k58) is not str: raise Unsure
                        if _k58 not in _c57:
                            if not (type(_a59) is dict) and not type_miss(_a59): return False
                if 'secrets' in _p53:
                    _p60 = _p53['secrets']
                    if not (type(_p60) is dict) and not type_miss(_p60): return False
                    for _k62, _a63 in _p60.items():
                        if type(_k62) is not str: raise Unsure
                        if _k62 not in _c61:
                            if not (type(_a63) is dict) and not type_miss(_a63): return False
                if 'config' in _p53:
                    _p64 = _p53['config']
                    if not (type(_p64) is dict) and not type_miss(_p64): return False
                    for _k66, _a67 in _p64.items():
                        if type(_k66) is not str: raise Unsure
                        if _k66 not in _c65:
                            if not (type(_a67) is dict) and not type_miss(_a67): return False
                if 'capabilities' in _p53:
                    _p68 = _p53['capabilities']
                    if not (type(_p68) is list) and not type_miss(_p68): return False
                    for _i69 in _p68:
                        if not (type(_i69) is str) and not type_miss(_i69): return False
                if 'bindings' in _p53:
                    _p70 = _p53['bindings']
                    if not (type(_p70) is list) and not type_miss(_p70): return False
                    for _i71 in _p70:
                        if not (type(_i71) is str) and not type_miss(_i71): return False
            if 'codeArtifactRef' in x:
                _p72 = x['codeArtifactRef']
                if not (type(_p72) is dict) and not type_miss(_p72): return False
                if not sum((_f73(_p72), _f74(_p72),)) == 1: return False
            if 'checkBuiltIn' in x:
                _p75 = x['checkBuiltIn']
                if not (_p75 is True): return type_miss(_p75)
            if 'judgeCapabilities' in x:
                _p76 = x['judgeCapabilities']
                if not (type(_p76) is dict) and not type_miss(_p76): return False
                for _k78, _a79 in _p76.items():
                    if type(_k78) is not str: raise Unsure
                    if _k78 not in _c77:
                        pass
            return True
        except (Unsure, RecursionError):
            return False
    def _f74(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'kind' not in x: return False
        if 'modulePath' not in x: return False
        if not _c80.issuperset(x):
            for _k81 in x:
                if type(_k81) is not str: raise Unsure
            return False
        _p82 = x['kind']
        if not (type(_p82) is str and _p82 in _c83): return type_miss(_p82)
        _p84 = x['modulePath']
        if not (type(_p84) is str) and not type_miss(_p84): return False
        return True
    def _f73(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'kind' not in x: return False
        if 'imageRef' not in x: return False
        if 'modulePath' not in x: return False
        if 'artifactVersion' not in x: return False
        if not _c85.issuperset(x):
            for _k86 in x:
                if type(_k86) is not str: raise Unsure
            return False
        _p87 = x['kind']
        if not (type(_p87) is str and _p87 in _c88): return type_miss(_p87)
        _p89 = x['imageRef']
        if not (type(_p89) is str) and not type_miss(_p89): return False
        _p90 = x['modulePath']
        if not (type(_p90) is str) and not type_miss(_p90): return False
        _p91 = x['artifactVersion']
        if not (type(_p91) is str) and not type_miss(_p91): return False
        return True
    def _f52(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'kind' not in x: return False
        if 'hosts' not in x: return False
        if not _c92.issuperset(x):
            for _k93 in x:
                if type(_k93) is not str: raise Unsure
            return False
        _p94 = x['kind']
        if not (type(_p94) is str and _p94 in _c95): return type_miss(_p94)
        _p96 = x['hosts']
        if not (type(_p96) is list) and not type_miss(_p96): return False
        for _i97 in _p96:
            if not (type(_i97) is str) and not type_miss(_i97): return False
        return True
    def _f51(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'kind' not in x: return False
        if not _c98.issuperset(x):
            for _k99 in x:
                if type(_k99) is not str: raise Unsure
            return False
        _p100 = x['kind']
        if not (type(_p100) is str and _p100 in _c101): return type_miss(_p100)
        return True
    def _f2(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if not _c102.issuperset(x):
            for _k103 in x:
                if type(_k103) is not str: raise Unsure
            return False
        if 'when' in x:
            _p104 = x['when']
            if not (type(_p104) is str and _p104 in _c105): return type_miss(_p104)
        if 'agents' in x:
            _p106 = x['agents']
            if not (type(_p106) is list) and not type_miss(_p106): return False
            for _i107 in _p106:
                if not (type(_i107) is str) and not type_miss(_i107): return False
        if 'flows' in x:
            _p108 = x['flows']
            if not (type(_p108) is list) and not type_miss(_p108): return False
            for _i109 in _p108:
                if not (type(_i109) is str) and not type_miss(_i109): return False
        if 'tenants' in x:
            _p110 = x['tenants']
            if not (type(_p110) is list) and not type_miss(_p110): return False
            for _i111 in _p110:
                if not (type(_i111) is str) and not type_miss(_i111): return False
        return True
    def _f1(x):
        if not (type(x) is dict) and not type_miss(x): return False
        if 'on-violation' not in x: return False
        if not _c112.issuperset(x):
            for _k113 in x:
                if type(_k113) is not str: raise Unsure
            return False
        _p114 = x['on-violation']
        if not (type(_p114) is str) and not type_miss(_p114): return False
        if not (len(_p114) >= 1): return False
        if 'retry' in x:
            _p115 = x['retry']
            if not (type(_p115) is dict) and not type_miss(_p115): return False
            if 'maxAttempts' not in _p115: return False
            if not _c116.issuperset(_p115):
                for _k117 in _p115:
                    if type(_k117) is not str: raise Unsure
                return False
            _p118 = _p115['maxAttempts']
            if not ((type(_p118) is int and LOW < _p118 < BIG)) and not type_miss(_p118): return False
        if 'escalateTo' in x:
            _p119 = x['escalateTo']
            if not (type(_p119) is str) and not type_miss(_p119): return False
        if 'compensateWith' in x:
            _p120 = x['compensateWith']
            if not (type(_p120) is str) and not type_miss(_p120): return False
        return True
    return _root


def _proof3():
    _c1 = frozenset(('action', 'check', 'id', 'kind', 'name'))
    _c5 = regex('^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}\\Z').search
    _c10 = frozenset(('on-violation',))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            for _k2, _a3 in x.items():
                if type(_k2) is not str: raise Unsure
                if _k2 not in _c1:
                    pass
            if 'id' in x:
                _p4 = x['id']
                if not (type(_p4) is str) and not type_miss(_p4): return False
                if not (_c5(_p4) is not None): return False
            if 'name' in x:
                _p6 = x['name']
                if not (type(_p6) is str) and not type_miss(_p6): return False
                if not (len(_p6) <= 300): return False
            if 'kind' in x:
                _p7 = x['kind']
                if not (type(_p7) is str) and not type_miss(_p7): return False
                if not (len(_p7) <= 100): return False
            if 'check' in x:
                _p8 = x['check']
                if not (type(_p8) is str) and not type_miss(_p8): return False
                if not (len(_p8) <= 200): return False
            if 'action' in x:
                _p9 = x['action']
                if not (type(_p9) is dict) and not type_miss(_p9): return False
                for _k11, _a12 in _p9.items():
                    if type(_k11) is not str: raise Unsure
                    if _k11 not in _c10:
                        pass
                if 'on-violation' in _p9:
                    _p13 = _p9['on-violation']
                    if not (type(_p13) is str) and not type_miss(_p13): return False
                    if not (len(_p13) <= 100): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof4():
    _c1 = frozenset(('allowedSources', 'min'))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            if 'min' in x:
                _p3 = x['min']
                if not ((type(_p3) is int and LOW < _p3 < BIG)) and not type_miss(_p3): return False
                if not (_p3 >= 1): return False
            if 'allowedSources' in x:
                _p4 = x['allowedSources']
                if not (type(_p4) is list) and not type_miss(_p4): return False
                if not len(_p4) >= 1: return False
                for _i5 in _p4:
                    if not (type(_i5) is str) and not type_miss(_i5): return False
                    if not (len(_i5) >= 1): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof5():
    _c1 = frozenset(('tools',))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'tools' not in x: return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            _p3 = x['tools']
            if not (type(_p3) is list) and not type_miss(_p3): return False
            if not len(_p3) >= 1: return False
            if not unique_strings(_p3): return False
            for _i4 in _p3:
                if not (type(_i4) is str) and not type_miss(_i4): return False
                if not (len(_i4) >= 1): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof6():
    _c1 = frozenset(('max', 'tool'))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'max' not in x: return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            _p3 = x['max']
            if not ((type(_p3) is int and LOW < _p3 < BIG)) and not type_miss(_p3): return False
            if not (_p3 >= 0): return False
            if 'tool' in x:
                _p4 = x['tool']
                if not (type(_p4) is str) and not type_miss(_p4): return False
                if not (len(_p4) >= 1): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof7():
    _c1 = frozenset(('flags', 'fullMatch', 'pattern'))
    _c5 = regex('^[ims]*\\Z').search
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'pattern' not in x: return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            _p3 = x['pattern']
            if not (type(_p3) is str) and not type_miss(_p3): return False
            if not (len(_p3) >= 1): return False
            if 'flags' in x:
                _p4 = x['flags']
                if not (type(_p4) is str) and not type_miss(_p4): return False
                if not (_c5(_p4) is not None): return False
            if 'fullMatch' in x:
                _p6 = x['fullMatch']
                if not (type(_p6) is bool) and not type_miss(_p6): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof8():
    _c1 = frozenset(('order',))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'order' not in x: return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            _p3 = x['order']
            if not (type(_p3) is list) and not type_miss(_p3): return False
            if not len(_p3) >= 2: return False
            if not unique_strings(_p3): return False
            for _i4 in _p3:
                if not (type(_i4) is str) and not type_miss(_i4): return False
                if not (len(_i4) >= 1): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


def _proof9():
    _c1 = frozenset(('caseSensitive', 'values'))
    def _root(x):
        try:
            if not (type(x) is dict) and not type_miss(x): return False
            if 'values' not in x: return False
            if not _c1.issuperset(x):
                for _k2 in x:
                    if type(_k2) is not str: raise Unsure
                return False
            _p3 = x['values']
            if not (type(_p3) is list) and not type_miss(_p3): return False
            if not len(_p3) >= 1: return False
            for _i4 in _p3:
                if not (type(_i4) is str) and not type_miss(_i4): return False
                if not (len(_i4) >= 1): return False
            if 'caseSensitive' in x:
                _p5 = x['caseSensitive']
                if not (type(_p5) is bool) and not type_miss(_p5): return False
            return True
        except (Unsure, RecursionError):
            return False
    return _root


PROOFS = {
    b'{"$defs":{"Citation":{"additionalProperties":false,"properties":{"quote":{"description":"The passage cited.","type":"string"},"source":{"description":"A URL or a document id.","type":"string"},"title":{"description":"The source\'s title.","type":"string"}},"required":["source"],"type":"object"},"Message":{"additionalProperties":false,"properties":{"content":{"description":"What was said.","type":["string","null"]},"name":{"description":"The speaker\'s name.","type":"string"},"role":{"description":"Who speaks.","enum":["system","user","assistant","tool"]},"toolCallId":{"description":"The tool call a tool message answers.","type":"string"}},"required":["role","content"],"type":"object"},"ToolCall":{"additionalProperties":false,"properties":{"arguments":{"description":"The arguments, any JSON value."},"endedAt":{"description":"When the call ended (RFC 3339).","format":"date-time","type":"string"},"error":{"description":"The error the call gave, if any.","type":["string","null"]},"id":{"description":"The call\'s id.","type":"string"},"name":{"description":"The tool\'s name.","maxLength":200,"minLength":1,"type":"string"},"result":{"description":"The result, any JSON value."},"startedAt":{"description":"When the call started (RFC 3339).","format":"date-time","type":"string"}},"required":["name"],"type":"object"},"Usage":{"additionalProperties":false,"description":"What the turn itself cost (not the judge).","properties":{"costUsd":{"description":"Cost in US dollars.","minimum":0,"type":"number"},"inputTokens":{"description":"Tokens read.","minimum":0,"type":"integer"},"model":{"description":"The model that answered.","type":"string"},"outputTokens":{"description":"Tokens written.","minimum":0,"type":"integer"}},"type":"object"}},"$id":"https://kindgi.dev/specs/runtrace.schema.json","$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"description":"The record of one agent turn (wire format 1), as a runtime sends it to the console or as a CI job stores it in a file. Objects other than metadata, arguments and result take no properties beyond those listed.","properties":{"agent":{"description":"Agent id (matched by scope.agents).","type":"string"},"citations":{"description":"Sources the response cites, when the runtime extracts them.","items":{"$ref":"#/$defs/Citation"},"type":"array"},"endedAt":{"description":"When the turn ended (RFC 3339); not before startedAt.","format":"date-time","type":"string"},"flow":{"description":"Flow id (matched by scope.flows).","type":"string"},"id":{"description":"The runtime\'s id for this run. Unique per tenant: it is the idempotency key of ingestion.","maxLength":200,"minLength":1,"type":"string"},"input":{"description":"What the user asked in this turn.","type":["string","null"]},"messages":{"description":"The conversation of the turn, in order.","items":{"$ref":"#/$defs/Message"},"type":"array"},"metadata":{"description":"Anything else; stored and shown, never interpreted.","type":"object"},"output":{"description":"The agent\'s final response. null or absent means the turn produced none.","type":["string","null"]},"startedAt":{"description":"When the turn started (RFC 3339).","format":"date-time","type":"string"},"tenant":{"description":"Tenant id.","maxLength":100,"minLength":1,"type":"string"},"toolCalls":{"description":"Every tool call of the turn, in the order it was made.","items":{"$ref":"#/$defs/ToolCall"},"type":"array"},"usage":{"$ref":"#/$defs/Usage"}},"required":["id"],"title":"RunTrace","type":"object","x-format-version":"1"}': _proof1,
    b'{"$defs":{"Action":{"additionalProperties":false,"description":"What a failed check does to the agent turn.","properties":{"compensateWith":{"description":"For on-violation = \'compensate\': the compensating tool\'s id. In 0.1 that tool isn\'t called.","title":"Compensate with","type":"string"},"escalateTo":{"description":"For on-violation = \'escalate\': a reviewer role or queue id. In 0.1 nothing escalates.","title":"Escalate to","type":"string"},"on-violation":{"description":"What a failed check does to the agent turn. Open string: any non-empty name is accepted here. In 0.1 the runtime acts only on \'halt\': the turn fails with guardrail-violation and its response is not stored. Any other name is recorded as a violation, as \'log-only\' is, and the turn completes. Built-in actions: \'halt\' = fail the turn. \'log-only\' = record, don\'t block. \'retry\', \'escalate\' and \'compensate\' are recorded like \'log-only\' in 0.1: nothing runs the turn again, escalates or calls a compensating tool.","examples":["halt","log-only","retry","escalate","compensate"],"minLength":1,"title":"On violation","type":"string"},"retry":{"additionalProperties":false,"description":"For on-violation = \'retry\': the attempts it asks for. In 0.1 nothing acts on it: there\'s no second attempt.","properties":{"maxAttempts":{"description":"How many attempts the retry asks for.","title":"Max attempts","type":"integer"}},"required":["maxAttempts"],"title":"Retry","type":"object"}},"required":["on-violation"],"title":"Action","type":"object"},"Scope":{"additionalProperties":false,"description":"When this guardrail applies: \'always\' (every run), \'ci-only\' (blocks CI, not runtime), \'runtime-only\' (runtime enforcement, not CI), or a per-agent/per-flow selector.","properties":{"agents":{"description":"Agent ids this guardrail applies to. Empty = all agents.","items":{"type":"string"},"title":"Agents","type":"array"},"flows":{"description":"Flow ids this guardrail applies to. Empty = all flows.","items":{"type":"string"},"title":"Flows","type":"array"},"tenants":{"description":"Tenant ids this guardrail applies to. Empty = all tenants.","items":{"type":"string"},"title":"Tenants","type":"array"},"when":{"description":"\'always\' (every run), \'ci-only\' (blocks CI, not runtime) or \'runtime-only\' (runtime enforcement, not CI).","enum":["always","ci-only","runtime-only"],"title":"When"}},"title":"Scope","type":"object"}},"$id":"https://kindgi.dev/specs/guardrail.schema.json","$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"description":"An assertion about agent behavior. Checked at runtime, where in 0.1 only halt stops the turn and every other action is recorded, AND in CI (blocks builds). Same definition, two enforcement paths \xe2\x80\x94 no drift between what tests check and what prod enforces. Zero-LLM checks are default (fast, deterministic); LLM-judge scorers are an opt-in class with explicit cost declaration. Schema-version 1.1.0 matches the Guardrail type: check is required, a retry object, when given, needs maxAttempts, kind and on-violation accept any non-empty string (the built-ins are listed as examples), and sandbox / limits / network / needsSpec are allowed.","properties":{"action":{"$ref":"#/$defs/Action"},"budget":{"additionalProperties":false,"description":"For llm-judge guardrails: cost budget per invocation. Declarative \xe2\x80\x94 not enforced by the runtime.","properties":{"maxCostUsd":{"description":"Most a single judge invocation should cost, in US dollars.","title":"Max cost (USD)","type":"number"},"maxLatencyMs":{"description":"Longest a single judge invocation should take, in milliseconds.","title":"Max latency (ms)","type":"integer"}},"title":"Budget","type":"object"},"check":{"description":"Id of the check in the CheckRegistry. For zero-llm: a built-in check (\'must-cite\', \'never-call-tool\', \'max-tool-calls\', \'output-matches\', \'tool-order\', \'required-substring\', \'forbidden-substring\') or a custom check id. For llm-judge: the id of a registered check of kind \'llm-judge\' (the judge is configured by config and judgeCapabilities). For external and adapter kinds: an id the kind\'s strategy understands. Required since schema-version 1.1.0 (defineGuardrail already failed without a registered check).","examples":["must-cite","never-call-tool","max-tool-calls","output-matches","tool-order","required-substring","forbidden-substring"],"title":"Check","type":"string"},"checkBuiltIn":{"const":true,"description":"Set by the CLI on a guardrail that names a built-in check (check) without shipping a check of its own: its codeArtifactRef is only the file it\'s declared in. A runtime warns about a guardrail naming a built-in, with a code artifact and without this marker (built by an older CLI): its pack may ship its own check under the built-in\'s id, which the built-in replaces.","title":"Built-in check"},"codeArtifactRef":{"description":"Handler-artifact pointer for the guardrail\'s check implementation. Discriminated on kind: oci is the deploy-pipeline shape (image + module path + artifactVersion); filesystem is the local-development shape \xe2\x80\x94 absolute host path at the check module. Production servers SHOULD reject filesystem.","oneOf":[{"additionalProperties":false,"properties":{"artifactVersion":{"description":"Version of the artifact.","title":"Artifact version","type":"string"},"imageRef":{"description":"Reference of the OCI image holding the check.","title":"Image","type":"string"},"kind":{"const":"oci","description":"The deploy-pipeline shape.","title":"Kind"},"modulePath":{"description":"Path of the check module inside the image.","title":"Module path","type":"string"}},"required":["kind","imageRef","modulePath","artifactVersion"],"title":"OCI image","type":"object"},{"additionalProperties":false,"properties":{"kind":{"const":"filesystem","description":"The local-development shape.","title":"Kind"},"modulePath":{"description":"Absolute host path at the check module.","title":"Module path","type":"string"}},"required":["kind","modulePath"],"title":"Filesystem","type":"object"}],"title":"Code artifact","type":"object"},"config":{"additionalProperties":true,"description":"Check-specific configuration. Interpreted by the check implementation.","title":"Config","type":"object"},"configSchema":{"description":"JSON Schema (Draft 2020-12) of the check\'s config, for a check that is pack code: the pack index\'s configSchema, which a deployment keeps on the guardrails it registers. The runtime checks a guardrail\'s config against it at registration, for any guardrail naming that check, and the pack service checks it on every call. Optional; a runtime-declaration field like codeArtifactRef.","title":"Config schema","type":"object"},"description":{"description":"What this guardrail guarantees, and what happens if violated.","title":"Description","type":"string"},"id":{"description":"Unique guardrail identifier.","title":"Id","type":"string"},"judgeCapabilities":{"additionalProperties":true,"description":"For llm-judge guardrails: capability declaration for the judge model. Routed through @kindgi/capabilities over the providers bound for evaluation; when the caller passes a tenant policy (an agent turn passes its own), the judge is routed under it. BYO judges supported.","title":"Judge capabilities","type":"object"},"kind":{"description":"How the guardrail is checked. Open string: the engine dispatches it to the execution strategy registered for that kind, and defineGuardrail requires a registered check of the same kind. Built-in kinds: \'zero-llm\' = pure function over run trace (default, fast, deterministic). \'llm-judge\' = uses a model to score (opt-in, costs money). \'external\' = evaluated outside the engine by a caller-registered strategy (the built-in \'external\' strategy returns an error). Adapters can register strategies for their own kinds.","examples":["zero-llm","llm-judge","external"],"minLength":1,"title":"Kind","type":"string"},"limits":{"additionalProperties":false,"description":"Sandbox-enforced resource caps while the check runs. Same shape as a tool\'s limits. Added in schema-version 1.1.0.","properties":{"cpuMs":{"description":"CPU-time cap for the check\'s handler, in milliseconds.","title":"CPU time (ms)","type":"integer"},"memMB":{"description":"Memory cap for the check\'s handler, in megabytes.","title":"Memory (MB)","type":"integer"}},"required":["memMB","cpuMs"],"title":"Limits","type":"object"},"name":{"description":"Human-readable name.","title":"Name","type":"string"},"needsSpec":{"additionalProperties":false,"description":"Typed discriminated needs of the check (env / secrets / config / capabilities / bindings). Same shape as a tool\'s needsSpec. Added in schema-version 1.1.0.","properties":{"bindings":{"description":"Bindings the check needs.","items":{"type":"string"},"title":"Bindings","type":"array"},"capabilities":{"description":"Capabilities the check needs.","items":{"type":"string"},"title":"Capabilities","type":"array"},"config":{"additionalProperties":{"type":"object"},"description":"Configuration values the check needs, by name.","title":"Config","type":"object"},"env":{"additionalProperties":{"type":"object"},"description":"Environment variables the check needs, by name.","title":"Environment","type":"object"},"secrets":{"additionalProperties":{"type":"object"},"description":"Secrets the check needs, by name.","title":"Secrets","type":"object"}},"title":"Needs","type":"object"},"network":{"description":"Network egress policy the sandbox honors while the check runs. Discriminated on kind; same shape as a tool\'s network. Added in schema-version 1.1.0.","oneOf":[{"additionalProperties":false,"properties":{"kind":{"description":"\'none\' = no egress; \'unrestricted\' = any host.","enum":["none","unrestricted"],"title":"Kind"}},"required":["kind"],"title":"No allowlist","type":"object"},{"additionalProperties":false,"properties":{"hosts":{"description":"Hosts the check may reach.","items":{"type":"string"},"title":"Hosts","type":"array"},"kind":{"const":"allowlist","description":"Egress only to the listed hosts.","title":"Kind"}},"required":["kind","hosts"],"title":"Allowlist","type":"object"}],"title":"Network","type":"object"},"sandbox":{"description":"Isolation posture the runtime enforces around the check\'s handler. Same values as a tool\'s sandbox. Added in schema-version 1.1.0.","enum":["none","context-isolated","strict"],"title":"Sandbox"},"scope":{"$ref":"#/$defs/Scope"},"severity":{"description":"How serious a violation of this guardrail is.","enum":["info","warn","error","critical"],"title":"Severity"}},"required":["id","kind","check","action"],"title":"Guardrail","type":"object","x-schema-version":"1.1.0"}': _proof2,
    b'{"$id":"https://kindgi.dev/specs/console-limits.schema.json","$schema":"https://json-schema.org/draft/2020-12/schema","description":"What the console stores of a guardrail, on top of the wire schema 1.1.0 (which stays as published): the lengths its database holds, and the id alphabet, chosen so that every id is one path segment of a URL (letters, digits and . _ : -, starting with a letter or digit, at most 200 characters).","properties":{"action":{"properties":{"on-violation":{"maxLength":100,"type":"string"}},"type":"object"},"check":{"maxLength":200,"type":"string"},"id":{"pattern":"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$","type":"string"},"kind":{"maxLength":100,"type":"string"},"name":{"maxLength":300,"type":"string"}},"title":"Guardrail limits of the console","type":"object"}': _proof3,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"allowedSources":{"description":"When given, every citation\'s source must be one of these.","items":{"minLength":1,"type":"string"},"minItems":1,"title":"Allowed sources","type":"array"},"min":{"default":1,"description":"How many citations the response needs at least.","minimum":1,"title":"Minimum citations","type":"integer"}},"type":"object"}': _proof4,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"tools":{"description":"Names of the tools the agent must never call.","items":{"minLength":1,"type":"string"},"minItems":1,"title":"Forbidden tools","type":"array","uniqueItems":true}},"required":["tools"],"type":"object"}': _proof5,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"max":{"description":"Most tool calls the turn may make.","minimum":0,"title":"Maximum calls","type":"integer"},"tool":{"description":"Count only the calls of this tool (all calls when absent).","minLength":1,"title":"Tool","type":"string"}},"required":["max"],"type":"object"}': _proof6,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"flags":{"description":"i = ignore case, m = ^ and $ match at line ends, s = . matches newlines.","pattern":"^[ims]*$","title":"Flags","type":"string"},"fullMatch":{"default":false,"description":"The pattern must match the whole output, not only a part of it.","title":"Full match","type":"boolean"},"pattern":{"description":"A regular expression in RE2 syntax (no backreferences, no lookaround).","minLength":1,"title":"Pattern","type":"string"}},"required":["pattern"],"type":"object"}': _proof7,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"order":{"description":"Tools in the order their first calls must come.","items":{"minLength":1,"type":"string"},"minItems":2,"title":"Order","type":"array","uniqueItems":true}},"required":["order"],"type":"object"}': _proof8,
    b'{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"caseSensitive":{"default":true,"description":"Compare case exactly; otherwise compare with Unicode case folding.","title":"Case sensitive","type":"boolean"},"values":{"description":"The substrings to look for in the output.","items":{"minLength":1,"type":"string"},"minItems":1,"title":"Values","type":"array"}},"required":["values"],"type":"object"}': _proof9,
}
