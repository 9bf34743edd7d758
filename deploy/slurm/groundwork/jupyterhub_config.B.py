# Throwaway hub for batchspawner research (cluster B: slurmd in netns slnb1/slnb2).
import batchspawner  # noqa: F401  registers /hub/api/batchspawner
token = open('/tmp/bs-hub/token').read().strip()
c.JupyterHub.bind_url = 'http://127.0.0.1:18000'
c.JupyterHub.hub_bind_url = 'http://0.0.0.0:18081'
c.JupyterHub.hub_connect_url = 'http://10.77.0.1:18081'
c.ConfigurableHTTPProxy.command = ['/tmp/chp/node_modules/.bin/configurable-http-proxy']
c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:18001'
c.JupyterHub.db_url = 'sqlite:////tmp/bs-hub/jupyterhub.sqlite'
c.JupyterHub.cookie_secret_file = '/tmp/bs-hub/cookie_secret'
c.JupyterHub.pid_file = '/tmp/bs-hub/hub.pid'
c.JupyterHub.authenticator_class = 'dummy'
c.Authenticator.allowed_users = {'slt-stu1', 'slt-stu2', 'slt-stu3', 'slt-stu4'}
c.JupyterHub.services = [{'name': 'ci', 'api_token': token}]
c.JupyterHub.load_roles = [{'name': 'ci-admin', 'scopes': ['admin:users', 'admin:servers', 'list:users', 'read:users'], 'services': ['ci']}]
c.JupyterHub.spawner_class = 'batchspawner.MultiSlurmSpawner'
c.MultiSlurmSpawner.daemon_resolver = {'b1': '10.77.0.2', 'b2': '10.77.0.3'}
c.Spawner.cmd = ['/tmp/bs-venv/bin/jupyterhub-singleuser']
c.Spawner.default_url = '/tree'
c.Spawner.env_keep = ['PATH', 'LANG', 'LC_ALL', 'SLURM_CONF']
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
c.SlurmSpawner.batchspawner_singleuser_cmd = '/tmp/bs-venv/bin/batchspawner-singleuser'
c.SlurmSpawner.req_partition = 'main'
c.SlurmSpawner.req_memory = '600M'
c.SlurmSpawner.req_nprocs = '1'
c.SlurmSpawner.poll_interval = 10
c.SlurmSpawner.exec_prefix = 'sudo -E -u {username}'
