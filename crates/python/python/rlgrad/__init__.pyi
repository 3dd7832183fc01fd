from . import mask as mask
from . import optim as optim
from . import returns as returns
