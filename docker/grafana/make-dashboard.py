#!/usr/bin/env python3
"""make-dashboard.py: writes docker/grafana/dashboards/gregor.json, the Grafana dashboard of issue #22.

    python3 docker/grafana/make-dashboard.py        (rewrites the JSON; commit both)

Grafana 10/11 dashboard schema (schemaVersion 39). Every panel queries the data source chosen in the
`datasource` variable (type prometheus); `instance`, `topic` and `group` filter by label, their "All" being
`.*` for instances and `.+` for topics and groups (so that the BrokerTopicMetrics series without a topic, the
broker's totals, stay out of the per-topic panels; the totals are read with topic=""). Three rows: broker health, topic traffic, consumer group lag and retention headroom. The metric names
are exactly issue #22's (Kafka's JMX exporter, kafka_exporter, gregor_*): dashboards written for Kafka work on
the first two rows unchanged. `make test-dashboard` (compat-tests/dashboard) runs every panel's expr against
a real Prometheus scraping a broker under load.
"""
import json
import os

DS = {'type': 'prometheus', 'uid': '${datasource}'}
I = 'instance=~"$instance"'
T = 'topic=~"$topic"'
G = 'consumergroup=~"$group"'
R = '$__rate_interval'

panels = []
_id = [0]
_y = [0]


def _next_id():
    _id[0] += 1
    return _id[0]


def row(title):
    panels.append({'id': _next_id(), 'type': 'row', 'title': title, 'collapsed': False,
                   'gridPos': {'h': 1, 'w': 24, 'x': 0, 'y': _y[0]}, 'panels': []})
    _y[0] += 1


_x = [0]


def panel(title, exprs, unit='short', kind='timeseries', w=8, h=7, desc='', mappings=None, legend=None):
    """exprs: [(expr, legendFormat)]."""
    if _x[0] + w > 24:
        _x[0] = 0
        _y[0] += h
    p = {'id': _next_id(), 'type': kind, 'title': title, 'description': desc, 'datasource': DS,
         'gridPos': {'h': h, 'w': w, 'x': _x[0], 'y': _y[0]},
         'fieldConfig': {'defaults': {'unit': unit, 'mappings': mappings or []}, 'overrides': []},
         'options': {},
         'targets': [{'refId': chr(ord('A') + i), 'datasource': DS, 'expr': e, 'legendFormat': lf,
                      'range': True, 'instant': False}
                     for i, (e, lf) in enumerate(exprs)]}
    if kind == 'timeseries':
        p['options'] = {'legend': {'displayMode': 'list', 'placement': 'bottom', 'showLegend': True},
                        'tooltip': {'mode': 'multi', 'sort': 'desc'}}
    elif kind == 'stat':
        p['options'] = {'reduceOptions': {'calcs': ['lastNotNull'], 'fields': '', 'values': False},
                        'colorMode': 'value', 'graphMode': 'area', 'textMode': 'auto'}
    elif kind == 'state-timeline':
        p['options'] = {'showValue': 'auto', 'mergeValues': True, 'rowHeight': 0.9,
                        'legend': {'displayMode': 'list', 'placement': 'bottom', 'showLegend': True}}
    panels.append(p)
    _x[0] += w


def end_row(h=7):
    _x[0] = 0
    _y[0] += h


row('Broker health')
panel('Active controller', [(f'sum(kafka_controller_kafkacontroller_activecontrollercount{{{I}}})', 'controllers')],
      kind='stat', w=4, h=4, desc='Brokers acting as controller: 1 in a healthy cluster.')
panel('Offline partitions', [(f'max(kafka_controller_kafkacontroller_offlinepartitionscount{{{I}}})', 'offline')],
      kind='stat', w=4, h=4, desc='Partitions without a live leader, as the controller sees them.')
panel('Under-replicated partitions',
      [(f'sum(kafka_server_replicamanager_underreplicatedpartitions{{{I}}})', 'under-replicated')],
      kind='stat', w=4, h=4, desc='Partitions whose ISR is smaller than their replica set (counted by leaders).')
panel('Under min ISR', [(f'sum(kafka_server_replicamanager_underminisrpartitioncount{{{I}}})', 'under min ISR')],
      kind='stat', w=4, h=4, desc='Partitions whose ISR is below min.insync.replicas: acks=all writes fail.')
panel('Partitions led', [(f'sum by (instance) (kafka_server_replicamanager_leadercount{{{I}}})', '{{instance}}')],
      kind='stat', w=4, h=4)
panel('Brokers', [('max(kafka_brokers)', 'brokers')], kind='stat', w=4, h=4)
end_row(4)
panel('Request rate by API',
      [(f'sum by (request) (rate(kafka_network_requestmetrics_requests_total{{{I}}}[{R}]))', '{{request}}')],
      unit='reqps', desc='Requests served per second, by Kafka API name (all versions).')
panel('Request time p99 (total)',
      [(f'max by (request) (kafka_network_requestmetrics_totaltimems{{{I},quantile="0.99"}})', '{{request}}')],
      unit='ms', desc='99th percentile of the time from request received to response sent; a long-poll '
      'Fetch includes its wait (remotetimems).')
panel('Errors by API and code',
      [(f'sum by (request, error) (rate(kafka_network_requestmetrics_errors_total{{{I},error!="NONE"}}[{R}]))',
        '{{request}} {{error}}')], unit='reqps', desc='Error codes returned per second (NONE left out).')
panel('Network and handler idle',
      [(f'avg by (instance) (kafka_network_socketserver_networkprocessoravgidlepercent{{{I}}})',
        'network {{instance}}'),
       (f'avg by (instance) (kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent{{{I}}})',
        'handlers {{instance}}')], unit='percentunit',
      desc='Fraction of the last minute the network thread (and request handlers) were idle; near 0: saturated.')
panel('Process CPU', [(f'rate(process_cpu_seconds_total{{{I}}}[{R}])', '{{instance}}')], unit='percentunit',
      desc='CPU seconds per second (1 = one core).')
panel('Process resident memory', [(f'process_resident_memory_bytes{{{I}}}', '{{instance}}')], unit='bytes')
end_row()

row('Topic traffic')
panel('Bytes in per topic',
      [(f'sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesin_total{{{I},{T}}}[{R}]))', '{{topic}}')],
      unit='Bps', desc="Leader appends of clients' Produce.")
panel('Bytes out per topic',
      [(f'sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesout_total{{{I},{T}}}[{R}]))', '{{topic}}')],
      unit='Bps', desc="Clients' Fetch answers (replication not included).")
panel('Messages in per topic',
      [(f'sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total{{{I},{T}}}[{R}]))', '{{topic}}')],
      unit='short', desc='Records appended per second.')
panel('Log size per topic', [(f'sum by (topic) (kafka_log_log_size{{{I},{T}}})', '{{topic}}')], unit='bytes',
      desc='Bytes on disk over the partitions held here (every replica).')
panel('Log segments per topic', [(f'sum by (topic) (kafka_log_log_numlogsegments{{{I},{T}}})', '{{topic}}')])
panel('Replication bytes',
      [(f'sum(rate(kafka_server_brokertopicmetrics_replicationbytesin_total{{{I},topic=""}}[{R}]))', 'in'),
       (f'sum(rate(kafka_server_brokertopicmetrics_replicationbytesout_total{{{I},topic=""}}[{R}]))', 'out')],
      unit='Bps', desc='Replica fetching, all topics (the series without a topic label).')
end_row()

row('Consumer groups: lag and retention headroom')
panel('Lag (kafka_exporter)',
      [(f'sum by (consumergroup, topic) (kafka_consumergroup_lag{{{G},{T}}} >= 0)', '{{consumergroup}} {{topic}}')],
      desc='High watermark minus committed offset, summed over partitions with a commit (-1: no commit, left out).')
panel('Lag in records',
      [(f'sum by (consumergroup, topic) (gregor_consumergroup_lag_records{{{G},{T}}})',
        '{{consumergroup}} {{topic}}')],
      desc='High watermark minus max(committed, log start): what is left to read.')
panel('Lag in seconds',
      [(f'max by (consumergroup, topic) (gregor_consumergroup_lag_seconds{{{G},{T}}})',
        '{{consumergroup}} {{topic}}')], unit='s',
      desc='Age of the oldest unread batch (broker append time), worst partition.')
panel('Retention headroom',
      [(f'min by (consumergroup, topic) (gregor_consumergroup_retention_headroom_seconds{{{G},{T}}})',
        '{{consumergroup}} {{topic}}')], unit='s',
      desc='Earliest time before retention may delete the segment holding the committed offset; 0: reached.')
panel('Minimum headroom per group',
      [(f'gregor_consumergroup_min_retention_headroom_seconds{{{G}}}', '{{consumergroup}}')], unit='s',
      kind='stat', desc='The smallest retention headroom over the group\'s partitions.')
panel('Records lost to retention',
      [(f'sum by (consumergroup, topic) (gregor_consumergroup_records_lost_total{{{G},{T}}})',
        '{{consumergroup}} {{topic}}')],
      desc='Records deleted (retention or DeleteRecords) before the group read them, since the broker started.')
panel('Group status (Burrow)', [(f'max by (consumergroup) (gregor_consumergroup_status{{{G}}})', '{{consumergroup}}')],
      kind='state-timeline', w=16,
      mappings=[{'type': 'value', 'options': {
          str(v): {'text': t, 'color': c, 'index': v} for v, t, c in
          [(0, 'NOTFOUND', 'text'), (1, 'OK', 'green'), (2, 'WARN', 'yellow'), (3, 'ERR', 'red'),
           (4, 'STOP', 'red'), (5, 'STALL', 'orange'), (6, 'REWIND', 'purple')]}}],
      desc="Burrow's evaluation of the last 10 commits per partition; the group shows its worst partition.")
panel('Lag in bytes',
      [(f'sum by (consumergroup, topic) (gregor_consumergroup_lag_bytes{{{G},{T}}})', '{{consumergroup}} {{topic}}')],
      unit='bytes')
end_row()


def var_query(name, label, query, desc, all_value='.+'):
    return {'name': name, 'label': label, 'type': 'query', 'datasource': DS, 'description': desc,
            'query': {'query': query, 'refId': name}, 'definition': query, 'refresh': 2, 'sort': 1,
            'multi': True, 'includeAll': True, 'allValue': all_value,
            'current': {'selected': True, 'text': ['All'], 'value': ['$__all']}, 'options': []}


dashboard = {
    'uid': 'gregor-overview',
    'title': 'Gregor',
    'description': 'Gregor broker health, topic traffic, and consumer group lag with retention headroom (issue #22).',
    'tags': ['gregor', 'kafka'],
    'timezone': 'browser',
    'editable': True,
    'graphTooltip': 1,
    'schemaVersion': 39,
    'version': 1,
    'refresh': '10s',
    'time': {'from': 'now-1h', 'to': 'now'},
    'annotations': {'list': []},
    'links': [],
    'templating': {'list': [
        {'name': 'datasource', 'label': 'Data source', 'type': 'datasource', 'query': 'prometheus',
         'current': {}, 'hide': 0, 'includeAll': False, 'multi': False, 'options': [], 'refresh': 1, 'regex': ''},
        var_query('instance', 'Broker', 'label_values(gregor_build_info, instance)', 'Brokers (scrape targets).', '.*'),
        var_query('topic', 'Topic', 'label_values(kafka_log_log_size, topic)', 'Topics held by the brokers.'),
        var_query('group', 'Consumer group',
                  'label_values(gregor_consumergroup_min_retention_headroom_seconds, consumergroup)',
                  'Consumer groups with commits.'),
    ]},
    'panels': panels,
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'dashboards', 'gregor.json')
with open(out, 'w') as f:
    json.dump(dashboard, f, indent=2)
    f.write('\n')
print(f'{out}: {sum(1 for p in panels if p["type"] != "row")} panels')
